package main

import (
	"errors"
	"flag"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag's size in bytes, written as GOMEMLIMIT is: an integer with an optional
// unit, B, KiB, MiB, GiB or TiB (256MiB), or plain bytes (268435456).
type byteSize int64

var _ flag.Value = (*byteSize)(nil)

var byteUnits = []struct {
	name string
	size int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// String writes the size in the largest unit that holds it whole: 256MiB, 1000.
func (s *byteSize) String() string {
	n := int64(*s)
	if n != 0 {
		for _, u := range byteUnits[:len(byteUnits)-1] {
			if n%u.size == 0 {
				return strconv.FormatInt(n/u.size, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// Set reads a size with or without a unit; the unit's case does not matter.
func (s *byteSize) Set(v string) error {
	v = strings.TrimSpace(v)
	digits := strings.TrimRight(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ")
	unit, mult := strings.TrimSpace(v[len(digits):]), int64(1)
	if unit != "" {
		mult = 0
		for _, u := range byteUnits {
			if strings.EqualFold(unit, u.name) {
				mult = u.size
			}
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || mult == 0 {
		return errors.New("want a size such as 256MiB (units B, KiB, MiB, GiB, TiB) or a number of bytes")
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return errors.New("size out of range")
	}
	*s = byteSize(n * mult)
	return nil
}
