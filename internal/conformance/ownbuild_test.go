package airlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// lazySandbox is a Sandbox made on first use and shared by the tests
// that need it.
type lazySandbox struct {
	once sync.Once
	sb   *airlock.Sandbox
	err  error
}

func (l *lazySandbox) get(t *testing.T, opts ...airlock.Option) *airlock.Sandbox {
	t.Helper()
	l.once.Do(func() { l.sb, l.err = airlock.New(context.Background(), opts...) })
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.sb
}

var ownLazy lazySandbox

// ownSandbox is a Sandbox on the own build: the suite's own when it runs
// on it (the default), else one made once for these tests.
func ownSandbox(t *testing.T) *airlock.Sandbox {
	t.Helper()
	if sb.Info().Build == "own" {
		return sb
	}
	return ownLazy.get(t, airlock.WithPython(python.SelectOwn))
}

func mustRunOn(t *testing.T, s *airlock.Sandbox, code string) string {
	t.Helper()
	return mustRunRequestOn(t, s, airlock.Request{Code: code})
}

func mustRunRequestOn(t *testing.T, s *airlock.Sandbox, req airlock.Request) string {
	t.Helper()
	res, err := s.Run(context.Background(), req)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run failed: err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// The C modules agents' code leans on are built in, and work.
func TestOwnBuildStdlibModules(t *testing.T) {
	s := ownSandbox(t)
	if info := s.Info(); info.Build != "own" || info.StdlibSHA256 == "" || !strings.Contains(info.Description, "3.13") {
		t.Fatalf("Info = %+v, want the own 3.13 build with its stdlib zip", info)
	}
	out := mustRunOn(t, s, `
import sys, zlib, bz2, lzma, sqlite3, decimal, json, json.decoder, pyexpat, xml.etree.ElementTree as ET
import socket, asyncio, hashlib, _decimal, _json, binascii, math, struct, array, unicodedata, _elementtree
print(sys.version_info[:2], sys.platform)
data = b"airlock " * 1000
print(zlib.decompress(zlib.compress(data)) == data, bz2.decompress(bz2.compress(data)) == data,
      lzma.decompress(lzma.compress(data)) == data)
con = sqlite3.connect(":memory:")
con.execute("create table t (x)")
con.executemany("insert into t values (?)", [(i,) for i in range(10)])
print(con.execute("select sum(x) from t").fetchone()[0], sqlite3.sqlite_version)
decimal.getcontext().prec = 30
print(decimal.Decimal(1) / decimal.Decimal(7), decimal.Decimal is _decimal.Decimal)
print(json.decoder.c_scanstring is not None, json.loads('{"a": [1, 2]}'))
print(ET.fromstring("<a><b k='v'/></a>").find("b").get("k"), pyexpat.EXPAT_VERSION.startswith("expat_"))
print(hashlib.sha256(b"x").hexdigest()[:8], socket.AF_INET > 0)
async def main():
    await asyncio.sleep(0)
    return "async ok"
print(asyncio.run(main()))
`)
	want := `(3, 13) wasi
True True True
45 3.46.1
0.142857142857142857142857142857 True
True {'a': [1, 2]}
v True
2d711642 True
async ok
`
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

// zoneinfo finds the IANA database (the tzdata package in the stdlib
// zip): offsets across a DST change, a historical rule, and the error for
// a zone that does not exist.
func TestOwnBuildZoneinfo(t *testing.T) {
	s := ownSandbox(t)
	out := mustRunOn(t, s, `
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones
ny = ZoneInfo("America/New_York")
for month in (1, 7):
    d = datetime(2026, month, 15, 12, tzinfo=timezone.utc).astimezone(ny)
    print(d.isoformat(), d.tzname())
# Nepal moved from +05:30 to +05:45 in 1986.
print(datetime(1985, 6, 1, tzinfo=ZoneInfo("Asia/Kathmandu")).utcoffset())
print(datetime(2026, 6, 1, tzinfo=ZoneInfo("Asia/Kathmandu")).utcoffset())
print(len(available_timezones()) > 400, "Europe/Berlin" in available_timezones())
try:
    ZoneInfo("Mars/Olympus_Mons")
except ZoneInfoNotFoundError as e:
    print("not found:", e)
`)
	want := `2026-01-15T07:00:00-05:00 EST
2026-07-15T08:00:00-04:00 EDT
5:30:00
5:45:00
True True
not found: 'No time zone found with key Mars/Olympus_Mons'
`
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

// The stdlib reaches the guest as a read-only layer: imported from the
// zip, and no run can change it for the next.
func TestOwnBuildStdlibReadOnly(t *testing.T) {
	s := ownSandbox(t)
	out := mustRunOn(t, s, `
import errno, json, os
zip = "`+python.OwnStdlibAt+`"
print(json.__file__.startswith(zip + "/"), os.path.getsize(zip) > 1_000_000)
for what, act in [("append", lambda: open(zip, "ab").write(b"x")),
                  ("truncate", lambda: open(zip, "wb")),
                  ("remove", lambda: os.remove(zip)),
                  ("rename", lambda: os.rename(zip, "/tmp/z")),
                  ("new file", lambda: open(os.path.dirname(zip) + "/evil.py", "w"))]:
    try:
        act()
        print(what, "allowed")
    except OSError as e:
        print(what, errno.errorcode.get(e.errno))
`)
	want := `True True
append EROFS
truncate EROFS
remove EROFS
rename EROFS
new file EROFS
`
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
	// Nothing of it leaked into the next run.
	if out := mustRunOn(t, s, `import os; print(os.path.exists("/tmp/z"), len(os.listdir("/usr/local/lib")))`); out != "False 1\n" {
		t.Fatalf("next run sees: %s", out)
	}
}
