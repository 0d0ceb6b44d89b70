package computeruse

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"image/png"
)

// scalePNG decodes a PNG and returns it scaled to w×h, as a PNG. Each
// output pixel is the average of the input pixels it covers (a box
// filter), which keeps text legible when a Retina capture is halved. A PNG
// that already has the size is returned as it is.
func scalePNG(data []byte, w, h int) ([]byte, error) {
	src, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decoding the screenshot: %w", err)
	}
	b := src.Bounds()
	if b.Dx() == w && b.Dy() == h {
		return data, nil
	}
	if w <= 0 || h <= 0 || b.Dx() <= 0 || b.Dy() <= 0 {
		return nil, fmt.Errorf("cannot scale a %dx%d screenshot to %dx%d", b.Dx(), b.Dy(), w, h)
	}
	in := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(in, in.Bounds(), src, b.Min, draw.Src)
	out := boxScale(in, w, h)
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, fmt.Errorf("encoding the screenshot: %w", err)
	}
	return buf.Bytes(), nil
}

// boxScale scales in to w×h: each output pixel averages the input pixels
// whose top-left corners fall in its footprint, at least one.
func boxScale(in *image.RGBA, w, h int) *image.RGBA {
	sw, sh := in.Bounds().Dx(), in.Bounds().Dy()
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	for oy := range h {
		y0 := oy * sh / h
		y1 := max((oy+1)*sh/h, y0+1)
		for ox := range w {
			x0 := ox * sw / w
			x1 := max((ox+1)*sw/w, x0+1)
			var r, g, bl, a, n uint32
			for y := y0; y < y1; y++ {
				row := in.Pix[y*in.Stride:]
				for x := x0; x < x1; x++ {
					p := row[x*4 : x*4+4]
					r += uint32(p[0])
					g += uint32(p[1])
					bl += uint32(p[2])
					a += uint32(p[3])
					n++
				}
			}
			o := out.Pix[oy*out.Stride+ox*4:]
			o[0], o[1], o[2], o[3] = uint8(r/n), uint8(g/n), uint8(bl/n), uint8(a/n)
		}
	}
	return out
}
