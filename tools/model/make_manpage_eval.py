#!/usr/bin/env python3
"""The real-text retrieval set: questions from man pages' NAME lines, passages from their
bodies. Man pages are never used for training or for the vocabulary (they are not in the
passage corpus), so this measures the model on text it has not seen.

Stdlib + man(1) and col(1) (Debian: man-db, bsdextrautils). Deterministic:
    python3 tools/model/make_manpage_eval.py [--pages 300] [--out tests/data/manpages]

Writes --out/eval.jsonl, one object a line:
  {"kind": "passage", "page": "ls.1", "text": "..."}   body paragraphs, <= 80 words
  {"kind": "query", "page": "ls.1", "text": "list directory contents"}
and --out/PROVENANCE.tsv (page, package, version, licence). A query is answered when one
of the top 10 passages comes from its page (hit@10).

Pages: sections 1 and 8 of /usr/share/man owned by a Debian package (dpkg's file lists),
at most two a package, sorted, every n-th one whose NAME line has a description of 3+
words and whose body gives 4+ passages. Passages leave out NAME,
SYNOPSIS and the boilerplate sections (SEE ALSO, AUTHOR, COPYRIGHT, BUGS, ...), so the
question's own words are not trivially in its page.
"""

import argparse
import glob
import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

SKIP_SECTIONS = {"NAME", "SYNOPSIS", "SEE ALSO", "AUTHOR", "AUTHORS", "COPYRIGHT",
                 "REPORTING BUGS", "BUGS", "HISTORY", "LICENSE", "LICENCE", "COLOPHON",
                 "AVAILABILITY", "VERSION", "COPYING", "THANKS", "ACKNOWLEDGEMENTS"}
MAX_WORDS = 80
MAX_PASSAGES = 30


def render(path):
    env = dict(os.environ, MANWIDTH="100", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="0")
    try:
        out = subprocess.run(["man", "--nh", "--nj", "-l", path], capture_output=True, env=env,
                             timeout=20).stdout
        return subprocess.run(["col", "-bx"], input=out, capture_output=True,
                              timeout=20).stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return ""


def sections(text):
    out, name, cur = [], None, []
    for line in text.split("\n"):
        if line and not line[0].isspace() and line.strip().upper() == line.strip() \
                and re.search(r"[A-Z]", line):
            if name is not None:
                out.append((name, cur))
            name, cur = line.strip(), []
        elif name is not None:
            cur.append(line)
    if name is not None:
        out.append((name, cur))
    return out[:-1] if out and re.search(r"\d{4}", out[-1][0]) else out


def paragraphs(lines):
    para = []
    for line in lines + [""]:
        if line.strip():
            para.append(line.strip())
        elif para:
            yield " ".join(para)
            para = []


def chunks(text):
    words = text.split()
    for i in range(0, len(words), MAX_WORDS):
        yield " ".join(words[i:i + MAX_WORDS])


def page_items(path):
    secs = sections(render(path))
    name = next((l for s, ls in secs if s == "NAME" for l in [" ".join(
        x.strip() for x in ls if x.strip())]), "")
    m = re.match(r"^(.+?)\s+(?:\\?-|\u2010|\u2013|\u2014)+\s+(.+)$", name)
    if not m:
        return None
    query = m.group(2).strip().rstrip(".")
    if len(query.split()) < 3 or re.match(r"(?i)manual page for ", query):
        return None  # help2man's placeholder says nothing
    passages = []
    for s, ls in secs:
        if s in SKIP_SECTIONS:
            continue
        for p in paragraphs(ls):
            for c in chunks(p):
                if len(c.split()) >= 8 and len(passages) < MAX_PASSAGES:
                    passages.append(c)
    if len(passages) < 4:
        return None
    return query, passages


def provenance(paths):
    owners = {}
    out = subprocess.run(["dpkg", "-S"] + paths, capture_output=True, text=True).stdout
    for line in out.splitlines():
        pkg, _, path = line.partition(": ")
        owners[path.strip()] = pkg.split(":")[0].split(",")[0].strip()
    rows = []
    for p in paths:
        pkg = owners.get(p, "?")
        ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                             capture_output=True, text=True).stdout or "?"
        lic = "?"
        try:
            with open("/usr/share/doc/%s/copyright" % pkg, encoding="utf-8",
                      errors="replace") as fh:
                for line in fh:
                    if line.startswith("License:"):
                        lic = line.split(":", 1)[1].strip() or "?"
                        break
        except OSError:
            pass
        rows.append((os.path.basename(p), pkg, ver, lic))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "manpages"))
    args = ap.parse_args()
    owner = {}
    for lst in sorted(glob.glob("/var/lib/dpkg/info/*.list")):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        with open(lst, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(("/usr/share/man/man1/", "/usr/share/man/man8/")):
                    owner.setdefault(line.strip(), pkg)
    per_pkg = {}
    files = []
    for f in sorted(owner):
        if not os.path.isfile(f) or os.path.islink(f) or owner[f].startswith("google-cloud"):
            continue
        per_pkg[owner[f]] = per_pkg.get(owner[f], 0) + 1
        if per_pkg[owner[f]] <= 2:
            files.append(f)
    step = max(1, len(files) // (args.pages * 3))
    os.makedirs(args.out, exist_ok=True)
    used, items, queries = [], [], set()
    for f in files[::step]:
        if len(used) >= args.pages:
            break
        got = page_items(f)
        if not got or got[0].lower() in queries:
            continue
        page = re.sub(r"\.gz$", "", os.path.basename(f))
        queries.add(got[0].lower())
        used.append(f)
        items.append({"kind": "query", "page": page, "text": got[0]})
        items.extend({"kind": "passage", "page": page, "text": p} for p in got[1])
    with open(os.path.join(args.out, "eval.jsonl"), "w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "PROVENANCE.tsv"), "w", encoding="utf-8") as fh:
        fh.write("page\tpackage\tversion\tlicence\n")
        for row in provenance(used):
            fh.write("\t".join(row) + "\n")
    print(json.dumps({"pages": len(used), "queries": sum(i["kind"] == "query" for i in items),
                      "passages": sum(i["kind"] == "passage" for i in items)}))


if __name__ == "__main__":
    main()
