package bodybuf

import (
	"strconv"
	"testing"
)

func TestClasses(t *testing.T) {
	var p Pool
	for _, tt := range []struct {
		n       int64
		wantCap int64 // capacity of the buffer Get returns
		pooled  bool
	}{
		{1, 1, false},
		{32 << 10, 32 << 10, false},
		{32<<10 + 1, 64 << 10, true},
		{64 << 10, 64 << 10, true},
		{64<<10 + 1, 80 << 10, true},
		{80 << 10, 80 << 10, true},
		{100 << 10, 112 << 10, true},
		{112<<10 + 1, 128 << 10, true},
		{200 << 10, 224 << 10, true},
		{1 << 20, 1 << 20, true},
		{1<<20 + 1, 1280 << 10, true},
		{3 << 20, 3 << 20, true},
		{28<<20 + 1, 32 << 20, true},
		{32 << 20, 32 << 20, true},
		{32<<20 + 1, 32<<20 + 1, false},
	} {
		t.Run(strconv.FormatInt(tt.n, 10), func(t *testing.T) {
			class, pooled := classOf(tt.n)
			if pooled != tt.pooled {
				t.Fatalf("classOf(%d) pooled = %v, want %v", tt.n, pooled, tt.pooled)
			}
			if pooled {
				if got := classSize(class); got != tt.wantCap {
					t.Errorf("classOf(%d) = class of %d bytes, want %d", tt.n, got, tt.wantCap)
				}
			}
			if got := p.Cap(tt.n); got != tt.wantCap {
				t.Errorf("Cap(%d) = %d, want %d", tt.n, got, tt.wantCap)
			}
			if got := (*Pool)(nil).Cap(tt.n); got != tt.n {
				t.Errorf("nil Pool: Cap(%d) = %d, want %d", tt.n, got, tt.n)
			}
			if tt.n > 2<<20 {
				return // the class is checked; spare the test a large buffer
			}
			if b := p.Get(tt.n); len(b) != 0 || int64(cap(b)) != tt.wantCap {
				t.Errorf("Get(%d): len %d cap %d, want len 0 cap %d", tt.n, len(b), cap(b), tt.wantCap)
			}
		})
	}
}

// TestClassSizes checks every class: four per power of two from 64 KiB to 32 MiB, each the
// smallest that holds the sizes above the one below it, and none wasting a quarter of a body
// above 64 KiB.
func TestClassSizes(t *testing.T) {
	var want []int64
	for s := minClassShift; s < maxClassShift; s++ {
		for q := int64(4); q < 8; q++ {
			want = append(want, q<<(s-2))
		}
	}
	want = append(want, maxClass)
	if len(want) != numClasses {
		t.Fatalf("%d class sizes, want numClasses = %d", len(want), numClasses)
	}
	for i, size := range want {
		if got := classSize(i); got != size {
			t.Fatalf("classSize(%d) = %d, want %d", i, got, size)
		}
		for _, n := range []int64{size - 1, size} {
			if c, ok := classOf(n); !ok || c != i {
				t.Errorf("classOf(%d) = %d, %v; want %d, true", n, c, ok, i)
			}
		}
		if i+1 < len(want) {
			if c, ok := classOf(size + 1); !ok || c != i+1 {
				t.Errorf("classOf(%d) = %d, %v; want %d, true", size+1, c, ok, i+1)
			}
		}
		if i > 0 {
			// The largest waste is for a body one byte over the class below.
			if n := want[i-1] + 1; 4*(size-n) >= n {
				t.Errorf("a body of %d bytes takes %d: a quarter of it or more unused", n, size)
			}
		}
	}
}

// sameArray reports whether two slices of non-zero capacity start at the same element.
func sameArray(a, b []byte) bool { return &a[:1][0] == &b[:1][0] }

func TestPut(t *testing.T) {
	t.Run("a buffer given back is lent again", func(t *testing.T) {
		var p Pool
		// sync.Pool may drop what it is given (always under the race detector, now and then),
		// so one of a few tries must bring the buffer back.
		for range 20 {
			b := append(p.Get(100<<10), "body"...)
			p.Put(b)
			got := p.Get(97 << 10)
			if len(got) != 0 || cap(got) != 112<<10 {
				t.Fatalf("Get(97 KiB) after Put: len %d cap %d, want 0 and %d", len(got), cap(got), 112<<10)
			}
			if sameArray(got, b) {
				return
			}
		}
		t.Fatal("a buffer given back never came back")
	})
	t.Run("other buffers are dropped", func(t *testing.T) {
		var p Pool
		class := p.Get(64 << 10)
		for _, b := range [][]byte{
			nil,
			make([]byte, 10),
			make([]byte, 0, 64<<10-1),
			make([]byte, 0, 64<<10+1),
			make([]byte, 0, 72<<10),  // between 64 and 80 KiB
			make([]byte, 0, 88<<10),  // between 80 and 96 KiB
			make([]byte, 0, 136<<10), // between 128 and 160 KiB
			make([]byte, 0, 32<<20+8<<20),
			class[1:1], // a subslice of a class buffer: its capacity is one short
		} {
			p.Put(b)
		}
		for _, n := range []int64{64 << 10, 80 << 10, 96 << 10, 128 << 10, 160 << 10} {
			for range 20 {
				if got := p.Get(n); len(got) != 0 || int64(cap(got)) != n {
					t.Fatalf("Get(%d) returned len %d cap %d after odd buffers were given back", n, len(got), cap(got))
				}
			}
		}
	})
	t.Run("a nil Pool allocates and drops", func(t *testing.T) {
		var p *Pool
		b := p.Get(100 << 10)
		if len(b) != 0 || cap(b) != 100<<10 {
			t.Fatalf("nil Pool: Get(100 KiB): len %d cap %d", len(b), cap(b))
		}
		p.Put(b)
	})
}
