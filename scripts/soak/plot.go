package main

import (
	"fmt"
	"image/color"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotSamples draws the samples as four panels over time: resident
// memory and the cache's size (MiB), goroutines and descriptors, live
// sessions, and the p50/p99 latency of plain runs (ms).
func plotSamples(samples []sample, file string) error {
	if len(samples) == 0 {
		return fmt.Errorf("no samples")
	}
	panels := []struct {
		title, ylabel string
		series        map[string]func(sample) float64
	}{
		{"memory", "MiB", map[string]func(sample) float64{
			"serve RSS": func(s sample) float64 { return s.rssMiB },
			"mcp RSS":   func(s sample) float64 { return s.mcpRSSMiB },
		}},
		{"cache directory (shared with the machine's other jobs)", "MiB", map[string]func(sample) float64{
			"cache dir": func(s sample) float64 { return s.cacheMiB },
		}},
		{"goroutines and descriptors", "count", map[string]func(sample) float64{
			"goroutines": func(s sample) float64 { return float64(s.goroutines) },
			"open fds":   func(s sample) float64 { return float64(s.fds) },
		}},
		{"sessions", "count", map[string]func(sample) float64{
			"live (in memory)": func(s sample) float64 { return float64(s.live) },
			"spilled (total)":  func(s sample) float64 { return float64(s.spilled) },
		}},
		{"plain run latency", "ms", map[string]func(sample) float64{
			"p50": func(s sample) float64 { return s.p50 },
			"p99": func(s sample) float64 { return s.p99 },
		}},
		{"machine load average (1 min; other jobs share it)", "load", map[string]func(sample) float64{
			"load": func(s sample) float64 { return s.load1 },
		}},
	}
	const w, h = 10 * vg.Inch, 16 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter}
	var plots [][]*plot.Plot
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "minutes"
		p.Y.Label.Text = pn.ylabel
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		i := 0
		for _, name := range sortedKeys(pn.series) {
			pts := make(plotter.XYs, len(samples))
			for j, s := range samples {
				pts[j].X, pts[j].Y = s.minute, pn.series[name](s)
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color = colors[i%len(colors)]
			line.Width = vg.Points(1.5)
			p.Add(line)
			p.Legend.Add(name, line)
			i++
		}
		p.Legend.Top = true
		plots = append(plots, []*plot.Plot{p})
	}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	png := vgimg.PngCanvas{Canvas: img}
	f, err := createFile(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = png.WriteTo(f)
	return err
}

func sortedKeys(m map[string]func(sample) float64) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func createFile(name string) (*os.File, error) { return os.Create(name) }

var colors = []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}}
