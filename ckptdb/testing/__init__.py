"""Support for testing code built on ckptdb: damage simulation helpers.

Not needed at run time; nothing in the library imports it.
"""
