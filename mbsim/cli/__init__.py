"""The ``mbsim`` command line: thin click commands over library functions.

Only this package imports click, and only this package turns exceptions into exit codes.
"""
