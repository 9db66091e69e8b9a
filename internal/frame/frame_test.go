package frame

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
)

func conn() *Conn {
	return &Conn{Max: 16,
		Handle: func(_ context.Context, p []byte) []byte { return []byte("ok:" + string(p)) },
		Fail:   func(msg string) []byte { return []byte("fail:" + msg) }}
}

func readAll(c *Conn) string {
	var b strings.Builder
	buf := make([]byte, 3)
	for {
		n, _ := c.Read(context.Background(), buf)
		if n == 0 {
			return b.String()
		}
		b.Write(buf[:n])
	}
}

func TestFrames(t *testing.T) {
	ctx := context.Background()
	c := conn()
	// A frame split across writes, byte by byte.
	for _, b := range []byte("00000003abc") {
		c.Write(ctx, []byte{b})
	}
	if got := readAll(c); got != "00000006ok:abc" {
		t.Fatalf("got %q", got)
	}
	if n, _ := c.Read(ctx, make([]byte, 8)); n != 0 {
		t.Fatal("a second read should be end of file")
	}
	// A bad header, an empty payload and an oversized one are answered,
	// and the device goes on.
	for in, want := range map[string]string{
		"zzzzzzzzrest":                       "malformed request: a frame starts",
		"00000000":                           "the payload is empty",
		"00000020" + strings.Repeat("x", 32): "the request is 32 bytes; the limit is 16",
	} {
		if n, err := c.Write(ctx, []byte(in)); err != nil || n != len(in) {
			t.Fatalf("%q: wrote %d, %v", in, n, err)
		}
		if got := readAll(c); !strings.Contains(got, want) {
			t.Errorf("%q: got %q", in, got)
		}
	}
	c.Write(ctx, []byte("00000001z"))
	if got := readAll(c); got != "00000004ok:z" {
		t.Fatalf("after errors: %q", got)
	}
	_ = io.EOF
}

func FuzzConn(f *testing.F) {
	f.Add([]byte("00000003abc"), 2)
	f.Add([]byte("0000ffffxyz"), 1)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		c := conn()
		ctx := context.Background()
		if split <= 0 {
			split = 1
		}
		for len(data) > 0 {
			k := min(split, len(data))
			n, err := c.Write(ctx, data[:k])
			if err != nil || n < 0 || n > k {
				t.Fatalf("Write(%d bytes) = %d, %v", k, n, err)
			}
			if n == 0 {
				n = k
			}
			data = data[n:]
			readAll(c)
		}
		_ = fmt.Sprint()
	})
}
