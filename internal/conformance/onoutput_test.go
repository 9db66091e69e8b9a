package airlock_test

import (
	"context"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

func TestOnOutput(t *testing.T) {
	got := map[string][]byte{}
	calls := 0
	res, err := sb.Run(context.Background(), airlock.Request{
		Code:   "import sys\nprint('out')\nprint('err', file=sys.stderr)\nprint('x' * 100)",
		Limits: airlock.Limits{Output: 50},
		OnOutput: func(stream string, p []byte) {
			calls++
			got[stream] = append(got[stream], p...)
		},
	})
	if err == nil || res.Error.Kind != airlock.KindOutputLimit {
		t.Fatalf("want an output limit, got %v", err)
	}
	// The hook sees exactly what the Result keeps, within the cap.
	if string(got["stdout"]) != string(res.Stdout) || string(got["stderr"]) != "err\n" || len(res.Stdout) != 50 || calls < 3 {
		t.Fatalf("hook stdout %q stderr %q (%d calls); result stdout %q", got["stdout"], got["stderr"], calls, res.Stdout)
	}
}
