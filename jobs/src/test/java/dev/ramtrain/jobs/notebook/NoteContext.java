package dev.ramtrain.jobs.notebook;

import java.io.PrintStream;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * The part of Zeppelin's ZeppelinContext ({@code z}) the notes use, without Zeppelin (whose
 * artifacts are not on Maven Central here): {@code show} prints a DataFrame in Zeppelin's %table
 * form, {@code textbox} returns the value the test gave a form (else its default), {@code put} and
 * {@code get} share objects between paragraphs.
 */
public final class NoteContext {
  private final Map<String, Object> shared = new HashMap<>();
  private final Map<String, String> forms;
  private final PrintStream out;
  private int tablesShown;

  NoteContext(Map<String, String> forms, PrintStream out) {
    this.forms = forms;
    this.out = out;
  }

  /** Zeppelin: a text box form with a default; here the test's value for it, else the default. */
  public Object textbox(String name, String defaultValue) {
    return forms.getOrDefault(name, defaultValue);
  }

  public Object textbox(String name) {
    return textbox(name, "");
  }

  public void put(String name, Object value) {
    shared.put(name, value);
  }

  public Object get(String name) {
    return shared.get(name);
  }

  /** Zeppelin's table display: a header line and tab-separated rows (the first 1,000). */
  public void show(Object table) {
    if (!(table instanceof Dataset<?> frame)) {
      throw new IllegalArgumentException("z.show takes a DataFrame, got " + table);
    }
    Dataset<Row> rows = frame.toDF();
    StringBuilder s = new StringBuilder("%table ");
    s.append(String.join("\t", rows.columns())).append('\n');
    List<Row> shown = rows.limit(1000).collectAsList();
    for (Row r : shown) {
      for (int i = 0; i < r.size(); i++) {
        s.append(i > 0 ? "\t" : "").append(r.get(i));
      }
      s.append('\n');
    }
    out.print(s);
    tablesShown++;
  }

  int tablesShown() {
    return tablesShown;
  }
}
