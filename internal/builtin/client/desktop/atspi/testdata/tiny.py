#!/usr/bin/python3
# A tiny GTK 3 app for package atspi's tests: an entry, a button that copies
# the entry into a label after a moment (so a reader must wait for it), a
# button that is never sensitive, and a second window.
import sys
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk, GLib

win = Gtk.Window(title="Tiny Main")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
entry = Gtk.Entry()
entry.get_accessible().set_name("field")
echo = Gtk.Label(label="empty")
echo.get_accessible().set_name("echo")
if hasattr(echo.get_accessible(), "set_accessible_id"):
    echo.get_accessible().set_accessible_id("echo-id")
copy = Gtk.Button(label="copy")
dead = Gtk.Button(label="dead")
dead.set_sensitive(False)
view = Gtk.TextView()
view.get_accessible().set_name("log")
view.set_editable(False)
view.get_buffer().set_text("line one\nŁódź ✓ line two")


def later():
    text = "echo: " + entry.get_text()
    echo.set_text(text)
    echo.get_accessible().set_name(text)
    return False


copy.connect("clicked", lambda _b: GLib.timeout_add(300, later))
for w in (entry, copy, dead, echo, view):
    box.pack_start(w, False, False, 0)
win.add(box)
win.connect("destroy", Gtk.main_quit)
win.show_all()
other = Gtk.Window(title="Tiny Other")
other.add(Gtk.Label(label="other"))
other.show_all()
print("ready", flush=True)
Gtk.main()
