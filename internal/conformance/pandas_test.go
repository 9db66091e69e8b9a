package airlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// pandas is linked into the own build beside numpy
// (scripts/pandas/build-pandas.sh): its Cython and C modules built in, its
// Python side and python-dateutil in the stdlib zip.

// pandasCSV is the input read_csv parses, with its dates, from the run's
// memory filesystem.
const pandasCSV = `when,kind,value
2026-11-01 09:00,a,1.5
2026-11-01 17:30,b,2.0
2026-11-02 08:15,a,4.0
2026-11-03 12:00,b,0.5
2026-11-03 23:59,a,3.0
`

// pandasProgram goes through the parts of pandas with C behind them: the
// hash tables (groupby, merge), the CSV tokenizer, the datetime and time
// zone code (tslibs, over the build's tzdata), resample and pivot_table,
// the JSON writer (ujson), and the string formatting of to_string.
const pandasProgram = `
import numpy as np
import pandas as pd
print(pd.__version__, pd.Series([1, 2]).dtype, pd.Series(["a"]).dtype)
df = pd.DataFrame({
    "city": ["Oslo", "Lima", "Oslo", "Pune", "Lima", "Oslo"],
    "temp": [3.5, 19.0, 4.5, 31.0, 18.0, 2.0],
    "n": [1, 2, 3, 4, 5, 6],
})
print("shape", df.shape, list(df.dtypes.astype(str)))
g = df.groupby("city").agg(mean_temp=("temp", "mean"), total=("n", "sum"), rows=("n", "size"))
print(g.to_string())
names = pd.DataFrame({"city": ["Lima", "Oslo", "Rome"], "country": ["Peru", "Norway", "Italy"]})
m = df.merge(names, on="city", how="left").sort_values(["city", "n"])
print("merge", m["country"].fillna("?").tolist(), int(m["country"].isna().sum()))
r = pd.read_csv("in.csv", parse_dates=["when"])
print("read_csv", r.shape, str(r["when"].dtype), r["value"].sum(), r["when"].max().isoformat())
daily = r.set_index("when")["value"].resample("D").sum()
print("resample", daily.tolist())
p = r.pivot_table(index=r["when"].dt.day, columns="kind", values="value", aggfunc="sum", fill_value=0)
print("pivot", p.to_dict())
r.assign(double=r["value"] * 2).to_csv("out.csv", index=False)
print("to_csv", open("out.csv").readline().strip(), len(open("out.csv").read().splitlines()))
t = pd.Timestamp("2026-03-29 00:30", tz="UTC")
print("tz", t.tz_convert("Europe/Berlin").isoformat(), (t + pd.Timedelta(hours=1)).tz_convert("Europe/Berlin").isoformat())
rng = pd.date_range("2026-10-24 12:00", periods=3, freq="D", tz="America/New_York")
print("tzrange", [x.isoformat() for x in rng.tz_convert("UTC")])
print("json", df.head(2).to_json(orient="records"))
print("module", pd.DataFrame.__module__, pd.Timestamp.__module__, type(pd.NaT).__name__)
print(df.describe().loc[["mean", "max"]].round(3).to_string())
`

// pandasOutput is the program's output from pandas 3.1.1 on CPython 3.13
// on x86-64 Linux (the wheels from PyPI), the same in the sandbox.
const pandasOutput = `3.1.1 int64 str
shape (6, 3) ['str', 'float64', 'int64']
      mean_temp  total  rows
city                        
Lima  18.500000      7     2
Oslo   3.333333     10     3
Pune  31.000000      4     1
merge ['Peru', 'Peru', 'Norway', 'Norway', 'Norway', '?'] 1
read_csv (5, 3) datetime64[us] 11.0 2026-11-03T23:59:00
resample [3.5, 4.0, 3.5]
pivot {'a': {1: 1.5, 2: 4.0, 3: 3.0}, 'b': {1: 2.0, 2: 0.0, 3: 0.5}}
to_csv when,kind,value,double 6
tz 2026-03-29T01:30:00+01:00 2026-03-29T03:30:00+02:00
tzrange ['2026-10-24T16:00:00+00:00', '2026-10-25T16:00:00+00:00', '2026-10-26T16:00:00+00:00']
json [{"city":"Oslo","temp":3.5,"n":1},{"city":"Lima","temp":19.0,"n":2}]
module pandas pandas NaTType
      temp    n
mean  13.0  3.5
max   31.0  6.0
`

// pandasRun runs pandasProgram on s with its CSV and checks the output and
// the CSV it wrote.
func pandasRun(t *testing.T, s *airlock.Sandbox) string {
	t.Helper()
	res, err := s.Run(context.Background(), airlock.Request{Code: pandasProgram, Files: map[string][]byte{"in.csv": []byte(pandasCSV)}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run failed: err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := string(res.Stdout); got != pandasOutput {
		t.Fatalf("output:\n%s\nwant:\n%s", got, pandasOutput)
	}
	var csv string
	for _, f := range res.Files {
		if strings.HasSuffix(f.Path, "out.csv") {
			csv = string(f.Data)
		}
	}
	want := "when,kind,value,double\n2026-11-01 09:00:00,a,1.5,3.0\n"
	if !strings.HasPrefix(csv, want) || strings.Count(csv, "\n") != 6 {
		t.Fatalf("out.csv (in Result.Files %v):\n%s\nwant it to start:\n%s", res.Files, csv, want)
	}
	return string(res.Stdout)
}

var pandasPreLazy lazySandbox

// pandasPreimported is a Sandbox whose snapshot image has pandas (and so
// numpy) imported already.
func pandasPreimported(t *testing.T) *airlock.Sandbox {
	t.Helper()
	return pandasPreLazy.get(t, airlock.WithSnapshots(true), airlock.WithPython(python.SelectOwn),
		airlock.WithPreimport("numpy", "numpy.random", "numpy.fft", "numpy.linalg", "pandas"))
}

// The same program, the same output as native pandas: in a fresh
// interpreter, from the snapshot image, and from an image pandas was
// pre-imported into (twice: the image is not changed by a run).
func TestPandasEndToEnd(t *testing.T) {
	own := ownSandbox(t)
	pandasRun(t, freshSandbox(t))
	if !own.Snapshots() {
		t.Skip("no snapshots here: checked in a fresh interpreter only")
	}
	pandasRun(t, own)
	pre := pandasPreimported(t)
	for range 2 {
		pandasRun(t, pre)
	}
}

// A DataFrame made in one call of a session is there in the next, and a
// fork gets its own copy.
func TestPandasSession(t *testing.T) {
	s := ownSession(t)
	mustCall(t, s, "import pandas as pd\ndf = pd.DataFrame({'k': list('abab'), 'v': range(4)})")
	if out := mustCall(t, s, "df['v'] *= 10\nprint(df.groupby('k')['v'].sum().to_dict())"); out != "{'a': 20, 'b': 40}\n" {
		t.Fatalf("second call: %q", out)
	}
	f, err := s.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if out := mustCall(t, f, "df.loc[len(df)] = ['c', 5]\nprint(len(df), df['v'].sum())"); out != "5 65\n" {
		t.Fatalf("fork: %q", out)
	}
	if out := mustCall(t, s, "print(len(df), df['v'].sum())"); out != "4 60\n" {
		t.Fatalf("the fork changed its parent's DataFrame: %q", out)
	}
}
