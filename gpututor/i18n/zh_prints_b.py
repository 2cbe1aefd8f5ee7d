"""Simplified Chinese for the sentences lessons print with ``say()`` (English template -> Chinese)."""

PRINTS_B = {
}
