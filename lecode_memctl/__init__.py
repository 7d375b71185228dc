"""memctl: admin and forensics for lecode's persistent memory."""

__version__ = "0.1.0"
