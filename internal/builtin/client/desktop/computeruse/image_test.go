package computeruse

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestScalePNG(t *testing.T) {
	t.Parallel()
	// A 4x2 image: left half black and white stripes, right half red.
	src := image.NewRGBA(image.Rect(0, 0, 4, 2))
	for y := range 2 {
		for x := range 4 {
			c := color.RGBA{255, 0, 0, 255}
			if x < 2 {
				c = color.RGBA{0, 0, 0, 255}
				if x == 1 {
					c = color.RGBA{200, 200, 200, 255}
				}
			}
			src.SetRGBA(x, y, c)
		}
	}
	out, err := scalePNG(encodePNG(t, src), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 2 || b.Dy() != 1 {
		t.Fatalf("scalePNG to 2x1 gave %dx%d", b.Dx(), b.Dy())
	}
	for x, want := range []color.RGBA{{100, 100, 100, 255}, {255, 0, 0, 255}} {
		r, g, b, a := img.At(x, 0).RGBA()
		if got := (color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}); got != want {
			t.Errorf("pixel %d = %v, want %v (the average of the pixels it covers)", x, got, want)
		}
	}

	same := encodePNG(t, src)
	if out, err := scalePNG(same, 4, 2); err != nil || !bytes.Equal(out, same) {
		t.Errorf("scalePNG to its own size changed the PNG (err %v)", err)
	}
	if _, err := scalePNG([]byte("not a png"), 2, 1); err == nil {
		t.Error("scalePNG of a non-PNG succeeded, want an error")
	}
}
