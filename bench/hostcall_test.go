package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// BenchmarkHostCall measures one host call round trip as the guest sees it
// (airlock.tools.add(i, 1): JSON both ways, a write and two reads of
// /dev/airlock, the Go function), timed inside the guest over 2000 calls
// after one warm-up call; ns/call is the figure, ns/op the whole run.
func BenchmarkHostCall(b *testing.B) {
	ctx := context.Background()
	tsb, err := airlock.New(ctx, airlock.WithHostFuncs(
		hostfuncs.Func("add", "Add.", func(_ context.Context, in addArgs) (int, error) { return in.A + in.B, nil }),
	))
	if err != nil {
		b.Fatal(err)
	}
	defer tsb.Close(ctx)
	const calls = 2000
	code := fmt.Sprintf(`
import airlock, time
add = airlock.tools.add
add(0, 0)
t = time.perf_counter_ns()
for i in range(%d):
    add(i, 1)
print(time.perf_counter_ns() - t)`, calls)
	var total float64
	for b.Loop() {
		res, err := tsb.Run(ctx, airlock.Request{Code: code, Limits: airlock.Limits{HostCalls: calls + 1}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
		}
		ns, _ := strconv.ParseFloat(strings.TrimSpace(string(res.Stdout)), 64)
		total += ns / calls
	}
	b.ReportMetric(total/float64(b.N), "ns/call")
}
