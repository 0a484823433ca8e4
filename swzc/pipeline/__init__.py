"""Pipeline: the user's options (frozen), each kernel's run plan, the driver, and the project's config."""
