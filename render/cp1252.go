package render

import "unicode/utf8"

// toCP1252 encodes s in Windows-1252, the encoding of the PDF's built-in
// fonts, and reports whether every rune of s has a place in it.
func toCP1252(s string) (string, bool) {
	ok := true
	b := make([]byte, 0, len(s))
	for _, r := range s {
		switch c, in := cp1252Byte(r); {
		case in:
			b = append(b, c)
		default:
			ok = false
			b = append(b, '?')
		}
	}
	return string(b), ok
}

// cp1252Byte is the byte of r in Windows-1252.
func cp1252Byte(r rune) (byte, bool) {
	switch {
	case r == utf8.RuneError:
		return 0, false
	case r < 0x80, r >= 0xa0 && r <= 0xff:
		return byte(r), true
	}
	c, ok := cp1252High[r]
	return c, ok
}

// cp1252High are the runes Windows-1252 puts at 0x80 to 0x9f.
var cp1252High = map[rune]byte{
	'€': 0x80, '‚': 0x82, 'ƒ': 0x83, '„': 0x84, '…': 0x85, '†': 0x86, '‡': 0x87, 'ˆ': 0x88, '‰': 0x89,
	'Š': 0x8a, '‹': 0x8b, 'Œ': 0x8c, 'Ž': 0x8e, '‘': 0x91, '’': 0x92, '“': 0x93, '”': 0x94, '•': 0x95,
	'–': 0x96, '—': 0x97, '˜': 0x98, '™': 0x99, 'š': 0x9a, '›': 0x9b, 'œ': 0x9c, 'ž': 0x9e, 'Ÿ': 0x9f,
}
