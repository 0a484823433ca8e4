"""`python -m swzc`: the same as the console script."""

from swzc.entry import main

if __name__ == "__main__":
    main()
