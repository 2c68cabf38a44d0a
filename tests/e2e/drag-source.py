#!/usr/bin/python3
"""A native drag source for the end-to-end tests, standing in for a file manager.

Shows a small GTK window titled by the first argument, in the screen's bottom-right corner,
whose button drags the files named by the other arguments as `text/uri-list`, as Files or
Finder do. The test presses the button and moves the pointer onto the app with xdotool (real
X input events under Xvfb), so the app receives a real XDND drop through GTK, WebKit, wry and
Tauri. That is the only kind of drop the app trusts (src-tauri/src/grants.rs): a page script
can emit a `tauri://drag-drop` event but never a native one.

Prints "ready" once the window is shown, "sent" when the app has taken the data, and exits when
the drag ends (or after 30 s).
"""

import sys
from pathlib import Path

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import GLib, Gdk, Gtk  # noqa: E402


def main() -> None:
    title, paths = sys.argv[1], sys.argv[2:]
    uris = [Path(p).absolute().as_uri() for p in paths]

    window = Gtk.Window(title=title)
    window.set_default_size(60, 40)
    window.set_decorated(False)
    button = Gtk.Button(label="drag")
    button.drag_source_set(Gdk.ModifierType.BUTTON1_MASK, [], Gdk.DragAction.COPY)
    button.drag_source_add_uri_targets()

    def on_get(_widget, _context, data, _info, _time):
        data.set_uris(uris)
        print("sent", flush=True)

    button.connect("drag-data-get", on_get)
    button.connect("drag-end", lambda *_: GLib.timeout_add(200, Gtk.main_quit))
    window.add(button)
    window.connect("destroy", Gtk.main_quit)
    screen = window.get_screen()
    window.move(screen.get_width() - 70, screen.get_height() - 50)
    window.show_all()
    GLib.timeout_add(300, lambda: print("ready", flush=True) and False)
    GLib.timeout_add_seconds(30, Gtk.main_quit)
    Gtk.main()


if __name__ == "__main__":
    main()
