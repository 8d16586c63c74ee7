"""Data preparation shared by every mechanism: reading the OSHA records, stratifying and splitting them
(``records``), the split files and features every stage reads (``splits``), and the two data stages."""
