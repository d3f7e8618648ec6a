package dev.ramtrain.console;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import org.junit.jupiter.api.Test;

class PrintableTest {
  @Test
  void controlCharactersBecomeVisibleEscapes() {
    assertEquals("a\\x1b]0;owned\\x07b", Printable.of("a\u001b]0;owned\u0007b"));
    assertEquals("line\\x0aforged: error", Printable.of("line\nforged: error"));
    assertEquals("\\x7f\\x9b", Printable.of("\u007f\u009b"));
    assertEquals("not \\x5cx1b a control", Printable.of("not \\x1b a control"), "unambiguous");
  }

  @Test
  void linesKeepTheirBreaks() {
    assertEquals("a\nb\\x1b[2J\n", Printable.lines("a\nb\u001b[2J\n"));
  }

  @Test
  void ordinaryTextIsKeptAsItIs() {
    String text = "chien/Ñandú 犬 ✓ C:\\data";
    assertSame(text, Printable.of(text));
  }

  @Test
  void aLongNameIsShownByItsStartAndLength() {
    String key = "k".repeat(5_000_000);
    String shown = Printable.name(key);
    assertEquals("k".repeat(Printable.NAME_CHARACTERS) + "… (5000000 characters)", shown);
    assertEquals("blocks.0.\\x1b[2J", Printable.name("blocks.0.\u001b[2J"));
    assertEquals("fc.weight", Printable.name("fc.weight"));
  }
}
