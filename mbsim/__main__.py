"""``python -m mbsim`` is the ``mbsim`` command."""

from mbsim.cli.entry import main

if __name__ == "__main__":
    main()
