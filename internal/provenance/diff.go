package provenance

// The diff is Myers' O(ND) algorithm in linear space (the "middle snake"
// bisection, as in diff-match-patch), on line hashes. Blame needs only
// which lines of a newer version are the same lines of an older one, so
// the result is a map from new indices to old ones rather than a script.

// maxDiffCost bounds the edit distance one bisection explores. Past it
// the two ranges are taken as wholly different: a file rewritten beyond
// recognition loses its history there, but a hostile pair of files
// cannot make blame run for minutes ((N+M)·maxDiffCost steps at most).
const maxDiffCost = 4096

// matchIndex returns, for each element of b, the index of the element of
// a it is matched with by a shortest edit script from a to b, or -1 for
// an element b inserted.
func matchIndex[T comparable](a, b []T) []int32 {
	m := make([]int32, len(b))
	for i := range m {
		m[i] = -1
	}
	d := differ[T]{a: a, b: b, m: m}
	d.compare(0, len(a), 0, len(b))
	return m
}

type differ[T comparable] struct {
	a, b   []T
	m      []int32
	v1, v2 []int // reused bisection vectors
}

// compare matches a[alo:ahi] with b[blo:bhi].
func (d *differ[T]) compare(alo, ahi, blo, bhi int) {
	for alo < ahi && blo < bhi && d.a[alo] == d.b[blo] {
		d.m[blo] = int32(alo)
		alo, blo = alo+1, blo+1
	}
	for alo < ahi && blo < bhi && d.a[ahi-1] == d.b[bhi-1] {
		d.m[bhi-1] = int32(ahi - 1)
		ahi, bhi = ahi-1, bhi-1
	}
	if alo == ahi || blo == bhi {
		return
	}
	x, y, ok := d.bisect(alo, ahi, blo, bhi)
	if !ok {
		return // too different (or nothing in common): no matches
	}
	d.compare(alo, alo+x, blo, blo+y)
	d.compare(alo+x, ahi, blo+y, bhi)
}

// bisect finds the middle snake of a[alo:ahi] and b[blo:bhi] (neither
// empty, first and last elements differing) and returns where to split,
// relative to alo and blo. ok is false when the ranges have nothing in
// common or their distance is over maxDiffCost.
func (d *differ[T]) bisect(alo, ahi, blo, bhi int) (x, y int, ok bool) {
	a, b := d.a[alo:ahi], d.b[blo:bhi]
	n, m := len(a), len(b)
	maxD := (n + m + 1) / 2
	if maxD > maxDiffCost {
		maxD = maxDiffCost
	}
	off := maxD + 1
	size := 2*maxD + 3
	if cap(d.v1) < size {
		d.v1, d.v2 = make([]int, size), make([]int, size)
	}
	v1, v2 := d.v1[:size], d.v2[:size]
	for i := range v1 {
		v1[i], v2[i] = -1, -1
	}
	v1[off+1], v2[off+1] = 0, 0
	delta := n - m
	front := delta%2 != 0
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	for dd := 0; dd < maxD; dd++ {
		for k1 := -dd + k1start; k1 <= dd-k1end; k1 += 2 {
			i := off + k1
			var x1 int
			if k1 == -dd || (k1 != dd && v1[i-1] < v1[i+1]) {
				x1 = v1[i+1]
			} else {
				x1 = v1[i-1] + 1
			}
			y1 := x1 - k1
			for x1 < n && y1 < m && a[x1] == b[y1] {
				x1, y1 = x1+1, y1+1
			}
			v1[i] = x1
			switch {
			case x1 > n:
				k1end += 2
			case y1 > m:
				k1start += 2
			case front:
				j := off + delta - k1
				if j >= 0 && j < size && v2[j] != -1 && x1 >= n-v2[j] {
					return x1, y1, true
				}
			}
		}
		for k2 := -dd + k2start; k2 <= dd-k2end; k2 += 2 {
			i := off + k2
			var x2 int
			if k2 == -dd || (k2 != dd && v2[i-1] < v2[i+1]) {
				x2 = v2[i+1]
			} else {
				x2 = v2[i-1] + 1
			}
			y2 := x2 - k2
			for x2 < n && y2 < m && a[n-x2-1] == b[m-y2-1] {
				x2, y2 = x2+1, y2+1
			}
			v2[i] = x2
			switch {
			case x2 > n:
				k2end += 2
			case y2 > m:
				k2start += 2
			case !front:
				j := off + delta - k2
				if j >= 0 && j < size && v1[j] != -1 {
					x1 := v1[j]
					y1 := off + x1 - j
					if x1 >= n-x2 {
						return x1, y1, true
					}
				}
			}
		}
	}
	return 0, 0, false
}
