package bench

import (
	"bytes"
	"context"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// BenchmarkSession times a session's operations on each SessionState;
// BenchmarkRun/pass is the fresh run they compare with.
func BenchmarkSession(b *testing.B) {
	ctx := context.Background()
	for _, st := range SessionStates {
		b.Run(st.Name, func(b *testing.B) {
			sess, err := sb.NewSession(ctx, airlock.SessionOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close(ctx)
			if err := runOK(sess.Run(ctx, airlock.Request{Code: st.Setup})); err != nil {
				b.Fatal(err)
			}
			b.Run("call", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := runOK(sess.Run(ctx, airlock.Request{Code: SessionCall})); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("fork", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					f, err := sess.Fork()
					if err != nil {
						b.Fatal(err)
					}
					f.Close(ctx)
				}
			})
			var saved bytes.Buffer
			b.Run("save", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					saved.Reset()
					if err := sess.Save(&saved); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(saved.Len()), "saved-bytes")
			})
			b.Run("load", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					s, err := sb.LoadSession(ctx, bytes.NewReader(saved.Bytes()), airlock.LoadOptions{})
					if err != nil {
						b.Fatal(err)
					}
					s.Close(ctx)
				}
			})
		})
	}
}

func TestMeasureSession(t *testing.T) {
	st, err := MeasureSession(context.Background(), sb, SessionStates[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 2 || st.Call <= 0 || st.Fresh <= 0 || st.Fork <= 0 || st.Save <= 0 || st.Load <= 0 || st.SavedBytes == 0 {
		t.Fatalf("stats = %+v", st)
	}
	if _, err := MeasureSession(context.Background(), sb, SessionState{"fails", "raise SystemExit(3)"}, 1); err == nil {
		t.Fatal("a failing set-up was measured as if it ran")
	}
}
