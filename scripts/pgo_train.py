"""Profile-guided optimisation: the training run of the own CPython build.

scripts/build-python.sh runs this once in an instrumented native build of
the same sources, and compiles python.wasm with the profile it leaves. It
exercises the interpreter the way agent code does (numbers, strings,
containers, classes, generators, exceptions, and the stdlib modules agents
reach for) and is deterministic, so the profile, and with it python.wasm,
is the same on every build: no clocks, no randomness without a seed, no
files, no threads (the script runs with PYTHONHASHSEED=0 and without
address randomisation). It is deliberately not the code `airlock bench
--compute` times.
"""

import base64
import bisect
import collections
import csv
import dataclasses
import datetime
import decimal
import difflib
import enum
import fractions
import functools
import hashlib
import heapq
import io
import itertools
import json
import math
import operator
import pickle
import random
import re
import sqlite3
import statistics
import string
import struct
import textwrap
import unicodedata
import zlib
import bz2
import lzma

ROUNDS = 3


def numbers(rng):
    total = 0
    for i in range(40_000):
        total += (i * 7 + 3) // 5 - i % 11
        total ^= i << 3
    floats = [rng.random() * 100 for _ in range(20_000)]
    acc = 0.0
    for x in floats:
        acc += math.sqrt(x) * math.sin(x) + x ** 0.5 - abs(x - 50.0)
    big = 1
    for i in range(1, 400):
        big *= i
    digits = str(big)
    assert int(digits) == big
    fr = sum(fractions.Fraction(1, n) for n in range(1, 120))
    decimal.getcontext().prec = 30
    d = sum(decimal.Decimal(n) / decimal.Decimal(n + 3) for n in range(1, 3000))
    cplx = sum(complex(i, -i) ** 2 for i in range(2000))
    stats = (statistics.mean(floats), statistics.median(floats), statistics.pstdev(floats[:2000]))
    return total, round(acc, 3), len(digits), fr.denominator % 1000, str(d)[:10], cplx, stats


def strings(rng):
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(6000)]
    text = " ".join(words)
    parts = text.split()
    upper = [w.upper() for w in parts if w.startswith(("a", "e", "i", "o", "u"))]
    joined = ",".join(sorted(set(parts)))
    formatted = [f"{i:>6}|{w:<10}|{len(w):03d}|{i / 7:.3f}" for i, w in enumerate(words[:3000])]
    percent = ["%s=%d (%.2f%%)" % (w, len(w), len(w) * 1.5) for w in words[:2000]]
    replaced = text.replace("a", "4").replace("e", "3").title().swapcase()
    found = sum(text.count(s) for s in ("ab", "zz", "qu", "th"))
    encoded = text.encode("utf-8")
    back = encoded.decode("utf-8")
    accents = "".join(unicodedata.normalize("NFC", "e\u0301a\u0300") for _ in range(500))
    wrapped = textwrap.fill(text[:20000], width=72)
    tpl = string.Template("$who likes $what").substitute(who="agent", what="python")
    builder = io.StringIO()
    for w in words:
        builder.write(w)
        builder.write("\n")
    return len(upper), len(joined), formatted[-1], percent[-1], len(replaced), found, back == text, len(accents), len(wrapped), tpl, len(builder.getvalue())


def containers(rng):
    d = {}
    for i in range(30_000):
        key = f"k{i % 997}"
        d[key] = d.get(key, 0) + i
    inverted = {v: k for k, v in d.items()}
    s = {i * 3 % 1009 for i in range(20_000)}
    t = tuple(range(500))
    nested = [[j for j in range(i % 13)] for i in range(5000)]
    flat = [x for row in nested for x in row]
    counter = collections.Counter(flat)
    dq = collections.deque(maxlen=100)
    for i in range(20_000):
        dq.append(i)
        if i % 3 == 0:
            dq.popleft()
    dd = collections.defaultdict(list)
    for i in range(10_000):
        dd[i % 17].append(i)
    od = collections.OrderedDict((str(i), i) for i in range(2000))
    od.move_to_end("5")
    Point = collections.namedtuple("Point", "x y")
    pts = [Point(i, -i) for i in range(5000)]
    data = [rng.randint(0, 10**6) for _ in range(20_000)]
    data.sort()
    by_key = sorted(pts, key=lambda p: (p.x % 10, -p.y))
    h = []
    for x in data[:5000]:
        heapq.heappush(h, -x)
    top = [heapq.heappop(h) for _ in range(100)]
    pos = [bisect.bisect_left(data, x) for x in range(0, 10**6, 997)]
    sliced = data[::3] + data[1::5]
    del sliced[100:200]
    sliced.reverse()
    return len(d), len(inverted), len(s), sum(t), counter.most_common(3), len(dq), len(dd[3]), next(iter(od)), by_key[0], top[:3], sum(pos), len(sliced)


class Shape:
    def area(self):
        raise NotImplementedError

    def __lt__(self, other):
        return self.area() < other.area()


class Rect(Shape):
    __slots__ = ("w", "h")

    def __init__(self, w, h):
        self.w, self.h = w, h

    def area(self):
        return self.w * self.h

    def __repr__(self):
        return f"Rect({self.w}, {self.h})"


class Circle(Shape):
    def __init__(self, r):
        self.r = r

    @property
    def diameter(self):
        return 2 * self.r

    def area(self):
        return math.pi * self.r * self.r


@dataclasses.dataclass(order=True)
class Item:
    name: str
    price: float
    qty: int = 1

    def total(self):
        return self.price * self.qty


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


def objects(rng):
    shapes = [Rect(i % 7 + 1, i % 5 + 1) if i % 2 else Circle(i % 9 + 1) for i in range(8000)]
    shapes.sort()
    area = sum(s.area() for s in shapes)
    diam = sum(s.diameter for s in shapes if isinstance(s, Circle))
    items = [Item(f"item{i}", i * 0.5, i % 4 + 1) for i in range(5000)]
    cheapest = min(items)
    total = sum(it.total() for it in items)
    as_dicts = [dataclasses.asdict(it) for it in items[:500]]
    colors = collections.Counter(Color(i % 3 + 1) for i in range(3000))
    reprs = [repr(s) for s in shapes[:1000] if isinstance(s, Rect)]
    attrs = sum(getattr(s, "r", 0) for s in shapes)
    return round(area, 2), diam, cheapest.name, total, len(as_dicts), colors[Color.RED], len(reprs), attrs


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@functools.lru_cache(maxsize=None)
def paths(x, y):
    if x == 0 or y == 0:
        return 1
    return paths(x - 1, y) + paths(x, y - 1)


def gen_squares(n):
    for i in range(n):
        if i % 3:
            yield i * i


def control(rng):
    f = fib(20)
    p = paths(60, 60)
    g = sum(gen_squares(50_000))
    chained = list(itertools.islice(itertools.chain(range(100), itertools.count(1000, 7)), 5000))
    groups = {k: len(list(v)) for k, v in itertools.groupby(sorted(chained, key=lambda x: x % 10), key=lambda x: x % 10)}
    perms = sum(1 for _ in itertools.permutations(range(7)))
    prod = functools.reduce(operator.mul, range(1, 30), 1)
    errors = 0
    for i in range(20_000):
        try:
            if i % 7 == 0:
                raise ValueError(i)
            {}[i] if i % 11 == 0 else None
        except ValueError:
            errors += 1
        except KeyError:
            errors += 2
        finally:
            errors += 0
    closures = [lambda x, i=i: x + i for i in range(1000)]
    applied = sum(c(1) for c in closures)
    pattern = 0
    for v in [(1, 2), [3, 4, 5], {"k": 1}, 7, "s", None] * 2000:
        match v:
            case (a, b):
                pattern += a + b
            case [a, *rest]:
                pattern += a + len(rest)
            case {"k": k}:
                pattern += k
            case int(n):
                pattern += n
            case _:
                pattern += 1
    return f, p, g, len(chained), groups[3], perms, prod % 1000, errors, applied, pattern


def stdlib(rng):
    doc = {"users": [{"id": i, "name": f"user{i}", "score": i * 1.5, "tags": ["a", "b"][: i % 3], "active": i % 2 == 0, "meta": None}
                     for i in range(3000)]}
    text = json.dumps(doc)
    assert json.loads(text) == doc
    pretty = json.dumps(doc["users"][:200], indent=2, sort_keys=True)
    log = "\n".join(f"2024-01-{i % 28 + 1:02d} 12:{i % 60:02d}:00 [{'INFO' if i % 3 else 'ERROR'}] request {i} took {i % 97}ms"
                    for i in range(8000))
    errors = re.findall(r"\[ERROR\] request (\d+) took (\d+)ms", log)
    subbed = re.sub(r"\d{4}-\d{2}-\d{2}", "DATE", log)
    splits = re.split(r"\s+", log[:50_000])
    matched = sum(1 for line in log.splitlines() if re.match(r"^\d{4}-\d{2}-(0[1-9]|1[0-5])", line))
    emails = re.compile(r"(?P<user>[\w.]+)@(?P<host>[\w-]+\.\w+)").findall(" ".join(f"u{i}@h{i % 9}.org" for i in range(3000)))
    db = sqlite3.connect(":memory:")
    db.execute("create table t (id integer primary key, name text, v real)")
    db.executemany("insert into t (name, v) values (?, ?)", [(f"n{i % 50}", i * 0.25) for i in range(5000)])
    rows = db.execute("select name, count(*), avg(v) from t group by name order by name").fetchall()
    db.close()
    blob = pickle.dumps(doc)
    assert pickle.loads(blob) == doc
    packed = b"".join(struct.pack("<iHd", i, i % 65535, i / 3) for i in range(5000))
    unpacked = [struct.unpack_from("<iHd", packed, off) for off in range(0, len(packed), 14)]
    b64 = base64.b64encode(packed)
    assert base64.b64decode(b64) == packed
    digests = [hashlib.sha256(packed[i:i + 1000]).hexdigest() for i in range(0, len(packed), 1000)]
    md5 = hashlib.md5(text.encode()).hexdigest()
    compressed = [len(zlib.compress(text.encode())), len(bz2.compress(packed[:30000])), len(lzma.compress(packed[:30000]))]
    out = io.StringIO()
    w = csv.writer(out)
    for u in doc["users"]:
        w.writerow([u["id"], u["name"], u["score"]])
    parsed = list(csv.DictReader(io.StringIO("id,name,score\n" + out.getvalue())))
    day = datetime.date(2024, 1, 1)
    days = [day + datetime.timedelta(days=i) for i in range(2000)]
    fmt = [d.strftime("%Y-%m-%d %a") for d in days[:1000]]
    parsed_dates = [datetime.datetime.strptime(s[:10], "%Y-%m-%d") for s in fmt[:300]]
    diff = list(difflib.unified_diff(pretty.splitlines()[:400], pretty.replace("user1", "USER1").splitlines()[:400], lineterm=""))
    return (len(text), len(errors), len(subbed), len(splits), matched, len(emails), rows[:2], len(unpacked), digests[0][:8],
            md5[:8], compressed, len(parsed), fmt[-1], parsed_dates[-1].day, len(diff))


def main():
    rng = random.Random(20250611)
    results = []
    for _ in range(ROUNDS):
        for step in (numbers, strings, containers, objects, control, stdlib):
            results.append(step(rng))
    print(f"pgo training: {len(results)} steps, {sum(len(repr(r)) for r in results)} chars of results")


if __name__ == "__main__":
    main()
