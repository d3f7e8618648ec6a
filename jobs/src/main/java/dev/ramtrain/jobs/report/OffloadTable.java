package dev.ramtrain.jobs.report;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/** The report's table of an offloaded run's step figures: medians over the logged steps. */
final class OffloadTable {
  private static final String[][] ROWS = {
    {"host to device per step (MiB)", "h2d_bytes", "mib"},
    {"device to host per step (MiB)", "d2h_bytes", "mib"},
    {"copy in (ms)", "copy_in_ms", ""},
    {"copy out (ms)", "copy_out_ms", ""},
    {"compute (ms)", "compute_ms", ""},
    {"exposed copies (ms)", "exposed_copy_ms", ""},
    {"overlap (share of copy time hidden)", "overlap", ""},
    {"host optimizer (ms)", "host_optimizer_ms", ""},
    {"exposed optimizer (ms)", "optimizer_exposed_ms", ""},
    {"step (ms)", "step_ms", ""},
    {"peak device memory (MiB)", "peak_device_bytes", "mib"},
    {"pinned host memory (MiB)", "pinned_host_bytes", "mib"}
  };

  private OffloadTable() {}

  /** The first logged step, which loads everything, is left out when there are others. */
  static String html(List<JsonNode> steps) {
    List<JsonNode> steady = steps.size() > 1 ? steps.subList(1, steps.size()) : steps;
    StringBuilder t = new StringBuilder();
    t.append(
        String.format(
            "<h2>Offload</h2>%n<p class=\"sub\">Medians over %d logged steps. Exposed: time the"
                + " compute stream waited for weights, or the host optimizer ran on after the last"
                + " gradient landed.</p>%n<table>%n",
            steady.size()));
    for (String[] row : ROWS) {
      double[] values =
          steady.stream().mapToDouble(r -> r.path(row[1]).asDouble()).sorted().toArray();
      double median = values[values.length / 2] / (row[2].equals("mib") ? 1 << 20 : 1);
      t.append(String.format("<tr><th class=\"key\">%s</th><td>%,.3f</td></tr>%n", row[0], median));
    }
    return t.append("</table>\n").toString();
  }
}
