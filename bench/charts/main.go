// Command charts draws the PNG charts of `airlock bench --peers --json`:
//
//	go run ./cmd/airlock bench --peers --json > peers.json
//	go run ./bench/charts -o docs/bench peers.json
//
// It is its own program so that the plotting stack (7 MB) stays out of
// every airlock binary.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/airlock-sandbox/airlock/bench"
)

func main() {
	dir := flag.String("o", ".", "folder to write latency.png and memory.png into")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: charts [-o DIR] REPORT.json (from airlock bench --peers --json)")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
}

func run(report, dir string) error {
	data, err := os.ReadFile(report)
	if err != nil {
		return err
	}
	var r struct {
		Results []bench.PeerResult `json:"results"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", report, err)
	}
	if len(r.Results) == 0 {
		return fmt.Errorf("%s: no results (is it a report of airlock bench --peers --json?)", report)
	}
	files, err := Charts(r.Results, dir)
	if err != nil {
		return err
	}
	fmt.Println(strings.Join(files, " "))
	return nil
}
