package migrations

import (
	"slices"
	"testing"
)

// TestDialectsShareVersions: a schema change is one file per dialect, so the
// version lists must be identical and gap-free.
func TestDialectsShareVersions(t *testing.T) {
	t.Parallel()
	var want []int
	for i, d := range Dialects {
		fs, err := Files(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) == 0 {
			t.Fatalf("%s has no migrations", d)
		}
		var got []int
		for j, f := range fs {
			if f.Version != j+1 {
				t.Errorf("%s: migration %s has version %d, want %d (no gaps)", d, f.Name, f.Version, j+1)
			}
			if f.SQL == "" {
				t.Errorf("%s: migration %s is empty", d, f.Name)
			}
			got = append(got, f.Version)
		}
		if i == 0 {
			want = got
		} else if !slices.Equal(got, want) {
			t.Errorf("%s versions %v differ from %s versions %v", d, got, Dialects[0], want)
		}
	}
}

func TestUnknownDialect(t *testing.T) {
	t.Parallel()
	if _, err := Files("oracle"); err == nil {
		t.Fatal("Files(oracle) succeeded")
	}
}
