package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/airlock-sandbox/airlock/bench"
)

// Charts draws results as PNG bar charts in dir, grouped by workload with
// one bar per sandbox: p50 latency on a log scale (latency.png) and peak
// memory (memory.png). It returns the files written.
func Charts(results []bench.PeerResult, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("charts: %w", err)
	}
	var workloads, sandboxes []string
	seen := map[string]bool{}
	for _, r := range results {
		if !seen["w"+r.Workload] {
			seen["w"+r.Workload] = true
			workloads = append(workloads, r.Workload)
		}
		if !seen["s"+r.Sandbox] {
			seen["s"+r.Sandbox] = true
			sandboxes = append(sandboxes, r.Sandbox)
		}
	}
	// Latencies span 1 ms to seconds: bars show log10(ms/logBase) on a
	// linear axis whose ticks are labelled in ms.
	const logBase = 0.1
	latency := func(r bench.PeerResult) float64 { return math.Log10(max(r.P50MS, logBase) / logBase) }
	memory := func(r bench.PeerResult) float64 { return mib(r.PeakMemory) }
	charts := []struct {
		file, title, ylabel string
		value               func(bench.PeerResult) float64
		ticks               plot.Ticker
	}{
		{"latency.png", "p50 latency per run (log scale, lower is better)", "ms", latency, logTicks{logBase}},
		{"memory.png", "peak memory per run (lower is better)", "MiB", memory, plot.DefaultTicks{}},
	}
	var files []string
	for _, c := range charts {
		p := plot.New()
		p.Title.Text = c.title
		p.Y.Label.Text = c.ylabel
		p.Y.Tick.Marker = c.ticks
		p.Y.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
		width := vg.Points(min(60/float64(len(sandboxes)), 14))
		for i, s := range sandboxes {
			vals := make(plotter.Values, len(workloads))
			for j, w := range workloads {
				for _, r := range results {
					if r.Workload == w && r.Sandbox == s {
						vals[j] = c.value(r)
					}
				}
			}
			bars, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return nil, fmt.Errorf("charts: %w", err)
			}
			bars.LineStyle.Width = 0
			bars.Color = palette[i%len(palette)]
			bars.Offset = width * vg.Length(float64(i)-float64(len(sandboxes)-1)/2)
			p.Add(bars)
			p.Legend.Add(s, bars)
		}
		p.NominalX(workloads...)
		grid := plotter.NewGrid()
		grid.Vertical.Color = nil
		p.Add(grid)
		// Headroom above the tallest bar for the legend.
		top := 0.0
		for _, r := range results {
			top = max(top, c.value(r))
		}
		p.Y.Max = max(top/0.68, 1)
		path := filepath.Join(dir, c.file)
		if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
			return nil, fmt.Errorf("charts: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xae, 0xc7, 0xe8, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0xff, 0xbb, 0x78, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff},
	color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xc4, 0x9c, 0x94, 0xff},
}

// logTicks labels a log10(ms/base) axis in milliseconds at each power of ten.
type logTicks struct{ base float64 }

func (t logTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(min); e <= math.Ceil(max); e++ {
		ticks = append(ticks, plot.Tick{Value: e, Label: strconv.FormatFloat(math.Pow10(int(e)+int(math.Round(math.Log10(t.base)))), 'f', -1, 64)})
	}
	return ticks
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
