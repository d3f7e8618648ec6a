package dev.ramtrain.jobs.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.jobs.train.RunJournal;
import java.awt.image.BufferedImage;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Opens a report in headless Chromium (Debian's {@code chromium}, which .ci/run installs): the
 * page's scripts run without error, every chart draws (its canvas has painted pixels), the log
 * scale and smoothing controls redraw without error, and a screenshot is kept in
 * target/report-browser/. Skipped only off CI on a machine without Chromium.
 */
class ReportBrowserTest {
  private static final Pattern CHECK =
      Pattern.compile("<pre id=\"browser-check\">(.*?)</pre>", Pattern.DOTALL);

  /**
   * Injected into a copy of the page: errors are collected from the first script on; after load,
   * each chart's canvases are read back (painted = pixels neither transparent nor white), then
   * every control is used and the charts read again.
   */
  private static final String COLLECT_ERRORS =
      "<script>window.__errors=[];addEventListener('error',function(e){"
          + "__errors.push(String(e.message));});</script>";

  private static final String INSPECT =
      """
      <script>
      function painted() {
        return Array.from(document.querySelectorAll('section.chart')).map(function (box) {
          var count = 0;
          box.querySelectorAll('canvas').forEach(function (c) {
            var d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            for (var i = 0; i < d.length; i += 4) {
              if (d[i + 3] > 0 && (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250)) count++;
            }
          });
          return { id: box.id, painted: count };
        });
      }
      addEventListener('load', function () {
        setTimeout(function () {
          var before = painted();
          document.querySelectorAll('section.chart input[type=checkbox]').forEach(function (b) {
            b.click();
          });
          document.querySelectorAll('section.chart input[type=range]').forEach(function (r) {
            r.value = '0.9';
            r.dispatchEvent(new Event('input'));
          });
          setTimeout(function () {
            var pre = document.createElement('pre');
            pre.id = 'browser-check';
            pre.textContent = JSON.stringify({ errors: window.__errors, before: before,
              after: painted(), charts: document.querySelectorAll('section.chart').length,
              controls: document.querySelectorAll('section.chart input').length });
            document.body.appendChild(pre);
          }, 300);
        }, 300);
      });
      </script>
      """;

  @TempDir Path tmp;

  @Test
  void theReportDrawsInABrowserWithoutScriptErrors() throws Exception {
    String chromium = findChromium();
    if (chromium == null) {
      if (System.getenv("CI") != null) {
        fail("no chromium on this CI machine: .ci/run installs Debian's chromium");
      }
      Assumptions.abort("no chromium here (Debian: apt-get install chromium)");
    }
    Path run = RunFixture.write(tmp.resolve("run"), 3, 0.01, true);
    Path index = TrainingReport.redraw(run, RunJournal.of(run)::claim);
    assertDrawsEveryChart(chromium, index);
    // Runs whose folder names would end or swallow the page's data script: still drawn.
    Path a = RunFixture.write(tmp.resolve("a<!--<script>"), 2, 0.01, false);
    Path b = RunFixture.write(tmp.resolve("b</script><b>x"), 2, 0.05, false);
    assertDrawsEveryChart(chromium, TrainingReport.draw(List.of(a, b), tmp.resolve("compare")));

    Path shots = Files.createDirectories(Path.of("target", "report-browser"));
    Path screenshot = shots.resolve("report.png");
    Files.deleteIfExists(screenshot); // this test's own file from an earlier run
    chromium(
        chromium,
        "--window-size=1280,3600",
        "--screenshot=" + screenshot.toAbsolutePath(),
        index.toUri().toString());
    BufferedImage shot = ImageIO.read(screenshot.toFile());
    assertNotNull(shot, "a screenshot at " + screenshot);
    assertEquals(1280, shot.getWidth());
  }

  /** Opens the page with the checks added: no script error, every chart painted, controls too. */
  private static void assertDrawsEveryChart(String chromium, Path index) throws Exception {
    String page = Files.readString(index, StandardCharsets.UTF_8);
    Path checked = index.resolveSibling("checked.html");
    Files.writeString(
        checked,
        page.replaceFirst("<head>", "<head>" + COLLECT_ERRORS)
            .replace("</body>", INSPECT + "</body>"));
    String dom = chromium(chromium, "--dump-dom", checked.toUri().toString());
    Matcher m = CHECK.matcher(dom);
    assertTrue(m.find(), "the page's check did not finish: " + tail(dom));
    JsonNode result = new ObjectMapper().readTree(m.group(1).replace("&quot;", "\""));
    assertEquals(0, result.get("errors").size(), "script errors: " + result.get("errors"));
    int charts = TrainingReportTest.chartData(page).get("charts").size();
    assertEquals(charts, result.get("charts").asInt(), "a chart box per chart of " + index);
    assertTrue(result.get("controls").asInt() >= 3, "log-scale and smoothing controls");
    for (String phase : List.of("before", "after")) {
      for (JsonNode c : result.get(phase)) {
        assertTrue(c.get("painted").asInt() > 500, phase + " the controls, nothing drawn in " + c);
      }
    }
  }

  private static String chromium(String binary, String... args) throws Exception {
    List<String> command =
        new ArrayList<>(
            List.of(
                binary,
                "--headless",
                "--no-sandbox", // CI runs as root, where Chromium's sandbox refuses to start
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--virtual-time-budget=10000"));
    command.addAll(List.of(args));
    Path out = Files.createTempFile("chromium", ".out");
    try {
      Process p =
          new ProcessBuilder(command)
              .redirectOutput(out.toFile())
              .redirectError(ProcessBuilder.Redirect.DISCARD) // its D-Bus complaints
              .start();
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        fail("chromium did not finish in 120 s: " + command);
      }
      assertEquals(0, p.exitValue(), "chromium exit status for " + command);
      return Files.readString(out, StandardCharsets.UTF_8);
    } finally {
      Files.deleteIfExists(out);
    }
  }

  private static String findChromium() {
    for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      for (String name : List.of("chromium", "chromium-browser")) {
        File f = new File(dir, name);
        if (f.canExecute()) {
          return f.getPath();
        }
      }
    }
    return null;
  }

  private static String tail(String s) {
    return s.length() > 2000 ? s.substring(s.length() - 2000) : s;
  }
}
