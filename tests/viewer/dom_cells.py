"""Text of a page dumped by `chromium --dump-dom`, one cell per line: the <title> first, then
every run of text between tags (styles and scripts left out), entities decoded, blank ones
dropped. The viewer test greps these lines for profile and function names."""
import html
import re
import sys

page = open(sys.argv[1], encoding="utf-8", errors="replace").read()
title = re.search(r"<title>(.*?)</title>", page, re.S)
print("TITLE " + html.unescape(title.group(1).strip()) if title else "TITLE")
page = re.sub(r"<(style|script|title)\b.*?</\1>", "", page, flags=re.S | re.I)
for cell in re.split(r"<[^>]*>", page):
    cell = html.unescape(cell).strip()
    if cell:
        print(cell)
