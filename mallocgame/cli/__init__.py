"""The command line: every click command of ``mallocgame`` lives in this package."""
