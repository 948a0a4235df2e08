"""``python -m chamvi.cli``: the same as the ``chamvi`` console script."""

from chamvi.cli import main

if __name__ == "__main__":
    main()
