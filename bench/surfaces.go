package bench

import "strconv"

// SurfaceWorkload is a program, with its input files, measured through
// every surface users call (`airlock bench --surfaces`): the Go API, HTTP,
// MCP, the CLI, and native CPython. Each checks its own result.
type SurfaceWorkload struct {
	Name  string
	Code  string
	Files map[string][]byte
}

// SurfaceWorkloads are the tasks agents and services send: a print, a
// numpy computation, a pandas summary of a CSV, a test file and a chart.
var SurfaceWorkloads = []SurfaceWorkload{
	{Name: "hello", Code: "print(1)"},
	{Name: "numpy_stats", Code: NumpyStats},
	{Name: "pandas_csv", Code: PandasCSV, Files: map[string][]byte{"sales.csv": SalesCSV}},
	{Name: "unittest_50", Code: Unittest50},
	{Name: "chart_png", Code: ChartPNG},
}

// ChartPNG is the chart a code interpreter is asked for: a 1,000-point
// line chart with a legend, saved as a PNG file (which comes back with
// the result). Agg names the backend natively too, where a display may
// otherwise pick a GUI one.
const ChartPNG = `
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 10, 1000)
fig, ax = plt.subplots()
ax.plot(x, np.sin(x), label="sin")
ax.plot(x, np.cos(x), label="cos")
ax.set_title("waves")
ax.legend()
fig.savefig("chart.png")
png = open("chart.png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, len(png)
print("chart.png", len(png) // 1000, "KB")
`

// NumpyStats is numpy-only work: a least-squares line through 10,000
// points and their statistics.
const NumpyStats = `
import numpy as np
x = np.linspace(0, 10, 10_000)
y = 3.0 * x + 2.0 + np.sin(x)
A = np.vstack([x, np.ones_like(x)]).T
slope, intercept = np.linalg.lstsq(A, y, rcond=None)[0]
stats = (float(y.mean()), float(y.std()), float(np.median(y)), slope, intercept)
assert abs(slope - 3.0) < 0.1 and abs(intercept - 2.0) < 0.5, stats
print("mean %.3f std %.3f median %.3f slope %.3f intercept %.3f" % stats)
`

// PandasCSV is the data task a code interpreter is asked for most: read a
// CSV, group, summarise, print.
const PandasCSV = `
import pandas as pd
df = pd.read_csv("sales.csv")
summary = df.groupby("region")["amount"].agg(["count", "sum", "mean"]).round(2)
assert int(summary["count"].sum()) == len(df) == 2000, summary
print(summary)
`

// SalesCSV is a ~100 KB CSV of 2,000 sales rows, the same every time.
// Made at every CLI process's start (package init): appended, not
// formatted, which took ~1 ms there.
var SalesCSV = func() []byte {
	regions := []string{"north", "south", "east", "west", "central"}
	products := []string{"widget", "gadget", "gizmo", "doohickey", "sprocket", "flange"}
	b := make([]byte, 0, 100<<10)
	b = append(b, "date,region,product,units,amount,customer\n"...)
	x := uint32(12345)
	for i := range 2000 {
		x = x*1664525 + 1013904223
		b = append(b, "2026-"...)
		b = appendPadded(b, 1+i%12, 2)
		b = append(b, '-')
		b = appendPadded(b, 1+i%28, 2)
		b = append(append(append(b, ','), regions[x>>8%5]...), ',')
		b = append(append(b, products[x>>12%6]...), ',')
		b = strconv.AppendUint(b, uint64(1+x>>16%40), 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, uint64(10+x>>4%990), 10)
		b = append(b, '.')
		b = appendPadded(b, int(x%100), 2)
		b = append(b, ",customer-"...)
		b = appendPadded(b, int(x>>10%20000), 5)
		b = append(b, '\n')
	}
	return b
}()

// appendPadded appends n in decimal, zero-padded to width digits (%0*d).
func appendPadded(b []byte, n, width int) []byte {
	digits := strconv.Itoa(n)
	for range width - len(digits) {
		b = append(b, '0')
	}
	return append(b, digits...)
}
