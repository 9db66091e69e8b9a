package wasmbin

import (
	"bytes"
	"errors"
	"testing"
)

func custom(name string, payload ...byte) Section {
	body := append([]byte{byte(len(name))}, name...)
	return Section{ID: CustomID, Body: append(body, payload...)}
}

func TestRoundTripAndStrip(t *testing.T) {
	secs := []Section{
		{ID: 1, Body: []byte{1, 0x60, 0, 0}},
		custom(".debug_info", 1, 2, 3),
		custom("name", 9),
		{ID: 10, Body: bytes.Repeat([]byte{7}, 300)}, // multi-byte size varint
		custom(".debug_line"),
	}
	mod := Encode(secs)
	got, err := Sections(mod)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(secs) || got[3].ID != 10 || len(got[3].Body) != 300 || got[2].Name() != "name" {
		t.Fatalf("round trip: %+v", got)
	}
	stripped, err := StripDebug(mod)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = Sections(stripped)
	if len(got) != 3 || got[1].Name() != "name" {
		t.Fatalf("strip kept %d sections", len(got))
	}
	again, _ := StripDebug(stripped)
	if &again[0] != &stripped[0] {
		t.Fatal("stripping a clean module copied it")
	}
}

func TestMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":      nil,
		"bad magic":  []byte("\x00asm\x02\x00\x00\x00"),
		"overlong":   append(append([]byte{}, magic...), 1, 50, 1),
		"bad varint": append(append([]byte{}, magic...), 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	} {
		if _, err := Sections(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func FuzzSections(f *testing.F) {
	f.Add(Encode([]Section{{ID: 1, Body: []byte{1}}, custom(".debug_x", 1)}))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\x80"))
	f.Fuzz(func(t *testing.T, b []byte) {
		secs, err := Sections(b)
		if err != nil {
			return
		}
		if !bytes.Equal(Encode(secs), b) && len(secs) > 0 {
			// Non-minimal size varints re-encode shorter; the sections must match.
			again, err := Sections(Encode(secs))
			if err != nil || len(again) != len(secs) {
				t.Fatalf("re-encoding changed the sections: %v", err)
			}
		}
		_, _ = StripDebug(b)
	})
}
