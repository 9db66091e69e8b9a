package bench

import (
	"math"
	"strings"
	"testing"
)

func TestParseCompute(t *testing.T) {
	ts, err := ParseCompute([]byte("noise\n" + ComputeMark + "[0.5, 0.25]\nmore"))
	if err != nil || len(ts) != 2 || ts[1] != 0.25 {
		t.Fatalf("ParseCompute = %v, %v", ts, err)
	}
	for _, bad := range []string{"", "no mark", ComputeMark + "[]", ComputeMark + "{"} {
		if _, err := ParseCompute([]byte(bad)); err == nil {
			t.Errorf("ParseCompute(%q) succeeded", bad)
		}
	}
}

func TestComputeProgramIndentsBody(t *testing.T) {
	p := ComputeProgram(ComputeWorkload{Name: "x", Setup: "k = 2", Body: "\nif k:\n    y = k\nassert y == 2"}, 3)
	for _, want := range []string{"k = 2\ndef _body():\n    if k:\n        y = k\n    assert y == 2\n", "range(3)"} {
		if !strings.Contains(p, want) {
			t.Fatalf("program lacks %q:\n%s", want, p)
		}
	}
}

func TestGeoMeanAndMedian(t *testing.T) {
	if g := GeoMean([]float64{1, 4}); math.Abs(g-2) > 1e-12 {
		t.Fatalf("GeoMean(1, 4) = %v", g)
	}
	if GeoMean(nil) != 0 || GeoMean([]float64{2, 0}) != 0 {
		t.Fatal("GeoMean of nothing or a zero must be 0")
	}
	if MedianOf([]float64{3, 1, 2}) != 2 || MedianOf([]float64{4, 1, 3, 2}) != 2.5 {
		t.Fatal("median")
	}
}
