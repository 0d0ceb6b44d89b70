package desktop

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// screenshot takes the X display's root window as a PNG, halved when it
// is wider than 1280 pixels (a diagnosis needs to show what is on the
// screen, not every pixel of it).
func screenshot(display string) (data []byte, width, height int, err error) {
	if display == "" {
		return nil, 0, 0, fmt.Errorf("no DISPLAY to take a screenshot of")
	}
	xgb.Logger = log.New(io.Discard, "", 0) // it logs a missing .Xauthority on stderr
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("connecting to the display %s: %w", display, err)
	}
	defer c.Close()
	scr := xproto.Setup(c).DefaultScreen(c)
	w, h := int(scr.WidthInPixels), int(scr.HeightInPixels)
	reply, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(scr.Root), 0, 0, uint16(w), uint16(h), 0xffffffff).Reply()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("reading the display %s: %w", display, err)
	}
	if reply.Depth != 24 && reply.Depth != 32 || len(reply.Data) < w*h*4 {
		return nil, 0, 0, fmt.Errorf("the display %s has depth %d; screenshots read 24-bit displays", display, reply.Depth)
	}
	step := 1
	if w > 1280 {
		step = 2
	}
	img := image.NewRGBA(image.Rect(0, 0, w/step, h/step))
	for y := 0; y < h/step; y++ {
		for x := 0; x < w/step; x++ {
			i := ((y*step)*w + x*step) * 4 // BGRX, least significant byte first
			img.SetRGBA(x, y, color.RGBA{R: reply.Data[i+2], G: reply.Data[i+1], B: reply.Data[i], A: 0xff})
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img); err != nil {
		return nil, 0, 0, err
	}
	return buf.Bytes(), w / step, h / step, nil
}
