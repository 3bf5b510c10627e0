package jsonptr

import "encoding/binary"

// valid reports whether b is exactly one JSON value (RFC 8259), with
// whitespace around it, as json.Valid does: the same documents, the same
// nesting bound (maxDepth), bytes of any value inside strings (UTF-8 is
// checked apart). It is json.Valid in one tight pass, without the
// scanner's call per byte: the presets read a key and an event type from
// every body, and that check was most of it. TestValid and FuzzValid hold
// it to json.Valid.
func valid(b []byte) bool {
	v := validator{b: b}
	i, ok := v.value(skipSpace(b, 0), 0)
	return ok && skipSpace(b, i) == len(b)
}

// maxDepth is encoding/json's bound on nesting: deeper documents are not
// valid for it.
const maxDepth = 10000

type validator struct {
	b []byte
	// top, when not nil, gets the members of a top-level object as they
	// are checked (ParseObject), each value a slice of b; a member named
	// twice ends as the last one.
	top Object
}

// value checks the value at b[i], depth objects and arrays deep, and
// returns the index just past it.
func (v validator) value(i, depth int) (int, bool) {
	b := v.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return v.str(i)
	case c == '{':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			name := i
			if i, ok = v.str(i); !ok {
				return i, false
			}
			nameEnd := i
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, false
			}
			at := skipSpace(b, i+1)
			if i, ok = v.value(at, depth+1); !ok {
				return i, false
			}
			if depth == 0 && v.top != nil {
				n, err := unquote(b[name:nameEnd])
				if err != nil {
					return i, false
				}
				v.top[n] = b[at:i:i]
			}
			if i, ok = v.next(i, '}'); !ok || b[i-1] == '}' {
				return i, ok
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = v.value(i, depth+1); !ok {
				return i, false
			}
			if i, ok = v.next(i, ']'); !ok || b[i-1] == ']' {
				return i, ok
			}
		}
	case c == '-' || ('0' <= c && c <= '9'):
		return v.number(i)
	case c == 't':
		return v.literal(i, "true")
	case c == 'f':
		return v.literal(i, "false")
	case c == 'n':
		return v.literal(i, "null")
	}
	return i, false
}

// next reads what follows a member or an element at b[i]: past a ',' and
// the space after it (b[i-1] is then not closer), or just past closer; ok
// is false for anything else.
func (v validator) next(i int, closer byte) (int, bool) {
	b := v.b
	if i = skipSpace(b, i); i >= len(b) {
		return i, false
	}
	switch b[i] {
	case ',':
		return skipSpace(b, i+1), true
	case closer:
		return i + 1, true
	}
	return i, false
}

// str checks the string at b[i] ('"').
func (v validator) str(i int) (int, bool) {
	b := v.b
	for i++; i < len(b); i++ {
		// Eight bytes at a time while none of them ends the string, starts
		// an escape or is a control character: a 1 KiB string's byte-by-byte
		// loop was a third of the parse of a Stripe body.
		for i+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

// number checks the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (v validator) number(i int) (int, bool) {
	b := v.b
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false
		}
		i = digits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false
		}
		i = digits(b, i)
	}
	return i, true
}

// digits is the index past the run of digits at b[i].
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// literal checks that b[i:] starts with lit (true, false, null).
func (v validator) literal(i int, lit string) (int, bool) {
	if len(v.b)-i < len(lit) || string(v.b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// special8 reports whether any of the eight bytes of x is '"', '\\' or
// under 0x20: the bytes a string's scan must stop at. Exact as a
// yes-or-no (the has-zero and has-less bit tricks over 64-bit words).
func special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs := x^(ones*'"'), x^(ones*'\\') // zero bytes where x has '"', '\\'
	return ((x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs)&highs != 0
}
