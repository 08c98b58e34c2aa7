#!/usr/bin/python3
"""Parses each SVG file with Python's XML parser (independent of the writer) and
prints: FILE root=<tag> cells=<class="cell" count> bars=<class="bar" count> texts=<n>.
Exit 1 on any file that is not well-formed XML or whose root is not <svg>."""
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
status = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        print(f"{path} not well-formed: {e}")
        status = 1
        continue
    elems = list(root.iter())
    count = lambda cls: sum(1 for e in elems if e.get("class") == cls)
    texts = sum(1 for e in elems if e.tag == SVG + "text")
    externals = sum(1 for e in elems if e.tag in (SVG + "image", SVG + "script", SVG + "use"))
    print(f"{path} root={root.tag.replace(SVG, '')} cells={count('cell')} bars={count('bar')} texts={texts} external={externals}")
    if root.tag != SVG + "svg":
        status = 1
sys.exit(status)
