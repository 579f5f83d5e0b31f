//! xterm.js as the UI uses it: the bindings xterm-js-rs lacks, opening a terminal with its
//! addons, scaling a tile into its box, writing bytes and painting a keyframe.

use js_sys::Uint8Array;
use std::rc::Rc;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use xterm_js_rs::addons::fit::FitAddon;
use xterm_js_rs::addons::unicode11::Unicode11Addon;
use xterm_js_rs::addons::webgl::WebglAddon;
use xterm_js_rs::{Terminal, TerminalOptions};

pub use crate::term_ui::Zoom;

#[wasm_bindgen]
extern "C" {
    /// The parts of xterm.js ≥ 5 that xterm-js-rs does not bind.
    pub type TerminalExt;
    #[wasm_bindgen(method, js_name = write)]
    pub fn write_bytes(this: &TerminalExt, data: &Uint8Array, done: &js_sys::Function);
    #[wasm_bindgen(method, catch, js_name = loadAddon)]
    pub fn try_load_addon(this: &TerminalExt, addon: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(method, getter)]
    pub fn unicode(this: &TerminalExt) -> UnicodeHandle;
    pub type UnicodeHandle;
    #[wasm_bindgen(method, setter, js_name = activeVersion)]
    pub fn set_active_version(this: &UnicodeHandle, v: &str);
    #[wasm_bindgen(method, getter)]
    pub fn options(this: &TerminalExt) -> TerminalOptions;
}

#[wasm_bindgen(module = "xterm-addon-search")]
extern "C" {
    /// xterm.js's search addon: finds text in the scrollback and selects it.
    pub type SearchAddon;
    #[wasm_bindgen(constructor)]
    pub fn new() -> SearchAddon;
    #[wasm_bindgen(method, js_name = findNext)]
    pub fn find_next(this: &SearchAddon, term: &str) -> bool;
    #[wasm_bindgen(method, js_name = findPrevious)]
    pub fn find_previous(this: &SearchAddon, term: &str) -> bool;
}

pub fn ext(t: &Terminal) -> &TerminalExt {
    t.unchecked_ref()
}

/// The terminal page's font size, in CSS pixels.
pub const FONT_PX: u32 = 14;
/// A screen scaled down further than this font size is not readable: below it, the page
/// shows the screen at full size and lets it pan instead.
pub const MIN_FONT_PX: f64 = 11.0;

/// The terminal's palette under a light page (`prefers-color-scheme: light`): dark text on
/// white, and ANSI colours dark enough to read on it.
const LIGHT_THEME: &str = r##"{"background":"#ffffff","foreground":"#383a42","cursor":"#383a42","cursorAccent":"#ffffff","selectionBackground":"#bfceff","black":"#383a42","red":"#c4252d","green":"#3b7d1f","yellow":"#8a6100","blue":"#2855d6","magenta":"#9a2a9c","cyan":"#0a6f87","white":"#6a6f7a","brightBlack":"#4f525e","brightRed":"#a8121c","brightGreen":"#2f6a16","brightYellow":"#7a5400","brightBlue":"#1d44b8","brightMagenta":"#82207f","brightCyan":"#075c70","brightWhite":"#383a42"}"##;

/// Whether the page is in its light theme.
pub fn light_scheme() -> bool {
    web_sys::window()
        .and_then(|w| {
            w.match_media("(prefers-color-scheme: light)")
                .ok()
                .flatten()
        })
        .is_some_and(|m| m.matches())
}

/// Opens xterm.js in `host`: the fit and Unicode 11 addons, WebGL unless the DOM renderer
/// was chosen (localStorage "ptyhost.renderer" = "dom"), no keyboard until it is wanted.
pub fn open_terminal(host: &web_sys::HtmlElement) -> (Rc<Terminal>, FitAddon) {
    open_terminal_with(host, FONT_PX, true)
}

/// `open_terminal` at `font_size`, and without WebGL when `webgl` is false (a page of many
/// small terminals: browsers give a page a handful of WebGL contexts).
pub fn open_terminal_with(
    host: &web_sys::HtmlElement,
    font_size: u32,
    webgl: bool,
) -> (Rc<Terminal>, FitAddon) {
    let options = TerminalOptions::new();
    options.set_cursor_blink(true);
    options.set_font_size(font_size);
    options.set_scrollback(5000);
    options.set_disable_stdin(true);
    if light_scheme()
        && let Ok(theme) = js_sys::JSON::parse(LIGHT_THEME)
    {
        options.set_theme(theme.unchecked_ref());
    }
    // The Unicode 11 width tables (matching the server's emulator) are a "proposed" API.
    let _ = js_sys::Reflect::set(&options, &"allowProposedApi".into(), &true.into());
    let term = Rc::new(Terminal::new(&options));
    let fit = FitAddon::new();
    term.load_addon(fit.clone().into());
    let unicode = Unicode11Addon::new();
    term.load_addon(unicode.into());
    ext(&term).unicode().set_active_version("11");
    term.open(host.clone());
    // WebGL where the browser has it, unless the user chose the DOM renderer
    // (localStorage "ptyhost.renderer" = "dom"); the DOM renderer otherwise.
    let dom_chosen = web_sys::window()
        .and_then(|w| w.local_storage().ok().flatten())
        .and_then(|s| s.get_item("ptyhost.renderer").ok().flatten())
        .is_some_and(|r| r == "dom");
    if webgl
        && !dom_chosen
        && ext(&term)
            .try_load_addon(&WebglAddon::new(None).into())
            .is_err()
    {
        leptos::logging::log!("WebGL unavailable; using the DOM renderer");
    }
    (term, fit)
}

/// Drops any scaling of the terminal element in `host`; the element.
pub fn unscale(host: &web_sys::HtmlElement) -> Option<web_sys::HtmlElement> {
    let el = host.first_element_child()?;
    let el = el.dyn_into::<web_sys::HtmlElement>().ok()?;
    let _ = el.style().remove_property("transform");
    Some(el)
}

/// Shows the terminal in `host` as `zoom` asks; what it did (`Fit` or `Actual`), which the
/// host carries as `data-zoom` for the page's styles.
pub fn scale_into(host: &web_sys::HtmlElement, zoom: Zoom) -> Zoom {
    let Some(el) = unscale(host) else {
        return Zoom::Actual;
    };
    let (have, need) = (host.client_width(), el.scroll_width());
    let scale = f64::from(have) / f64::from(need.max(1));
    let fit = need > have
        && have > 0
        && match zoom {
            Zoom::Fit => true,
            Zoom::Actual => false,
            Zoom::Readable => scale * f64::from(FONT_PX) >= MIN_FONT_PX,
        };
    let done = if fit {
        let _ = el
            .style()
            .set_property("transform", &format!("scale({scale})"));
        let _ = el.style().set_property("transform-origin", "top left");
        Zoom::Fit
    } else {
        Zoom::Actual
    };
    let _ = host.set_attribute("data-zoom", if fit { "fit" } else { "actual" });
    done
}

/// Writes bytes to xterm.js, with nothing to do once they are parsed.
pub fn write_bytes(term: &Terminal, bytes: &[u8]) {
    let nothing = js_sys::Function::new_no_args("");
    ext(term).write_bytes(&Uint8Array::from(bytes), &nothing);
}

/// Repaints `term` from a keyframe: reset, the keyframe's size, then its snapshot.
pub fn paint_keyframe(term: &Terminal, snapshot: &[u8], cols: u16, rows: u16) {
    term.reset();
    term.resize(u32::from(cols), u32::from(rows));
    write_bytes(term, snapshot);
}
