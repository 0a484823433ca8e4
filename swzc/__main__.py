"""`python -m swzc`: the same as the console script."""

from swzc.commands.main import main

if __name__ == "__main__":
    main()
