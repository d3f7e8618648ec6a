package dev.ramtrain.jobs.cli;

import dev.ramtrain.console.Printable;
import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.report.AtomicFile;
import dev.ramtrain.jobs.report.ContactSheet;
import dev.ramtrain.jobs.report.DatasetReport;
import dev.ramtrain.settings.ConfigException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.hadoop.conf.Configuration;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(
    name = "inspect",
    mixinStandardHelpOptions = true,
    header = "Summarize a dataset and draw a contact sheet of its samples.",
    description = {
      "Print a dataset's manifest summary and class histogram, and draw a contact sheet "
          + "PNG of samples.",
      "Runs in this process, on the driver: --master does not distribute it."
    })
public final class InspectCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Parameters(paramLabel = "DATASET", description = "Dataset directory (local path or Hadoop URI).")
  String dataset;

  @Option(names = "--samples", description = "Samples on the sheet (ramtrain.inspect.samples).")
  Integer samples;

  @Option(
      names = "--sheet",
      paramLabel = "PNG",
      showDefaultValue = CommandLine.Help.Visibility.NEVER,
      description =
          "Where the contact sheet goes (ramtrain.inspect.sheet). Default: DATASET-samples.png"
              + " beside the dataset (a temporary folder where that cannot be written);"
              + " --samples 0 draws none.")
  String sheet;

  @Option(
      names = "--split",
      defaultValue = "train",
      description = "Split to sample: train or val (default ${DEFAULT-VALUE}).")
  String split;

  @Option(
      names = "--verify-all",
      description =
          "Check every shard's CRC32C and decode every stored JPEG"
              + " (ramtrain.inspect.verify-all).")
  Boolean verifyAll;

  @Override
  public Integer call() throws Exception {
    RamtrainConfig config = common.load(flags());
    System.out.print(Printable.lines(run(config, dataset, split))); // names come from folders
    return 0;
  }

  Map<String, String> flags() {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.inspect.samples", CommonFlags.text(samples));
    f.put("ramtrain.inspect.sheet", sheet);
    f.put("ramtrain.inspect.verify-all", CommonFlags.text(verifyAll));
    return f;
  }

  /** Summarizes {@code location}, writes its sheet, and returns the text shown to the user. */
  static String run(RamtrainConfig config, String location, String split) throws IOException {
    Dataset ds = Dataset.open(location, new Configuration());
    if (!ds.manifest().splits().containsKey(split)) {
      throw new ConfigException(
          "--split "
              + split
              + ": "
              + location
              + " has the splits "
              + new java.util.TreeSet<>(ds.manifest().splits().keySet()));
    }
    StringBuilder out = new StringBuilder(DatasetReport.summary(ds));
    if (config.bool("ramtrain.inspect.verify-all")) {
      out.append(
          String.format(
              "verified     %,d rows, every shard's CRC32C matches%s%n",
              DatasetReport.verifyAll(ds),
              ds.manifest().shardSchema().encoded() ? ", every JPEG decodes" : ""));
    }
    int n = config.integer("ramtrain.inspect.samples");
    RamtrainConfig.require(n >= 0 && n <= 4096, "ramtrain.inspect.samples", "must be in [0, 4096]");
    if (n > 0) {
      var picked = DatasetReport.samples(ds, split, n);
      if (!picked.isEmpty()) {
        String sheet = config.string("ramtrain.inspect.sheet");
        Path png;
        if (sheet.isBlank()) {
          png = defaultSheet(location);
        } else {
          png = Path.of(sheet);
          OutputFile.requireReplaceable(
              png, "inspect --sheet", List.of(Path.of(location)), AtomicFile::isRamtrainPng);
          requireOutsideSource(png, ds.manifest());
        }
        Manifest m = ds.manifest();
        ContactSheet.write(picked, m.image().shape(), m.classes(), png);
        out.append(
            String.format(
                "contact sheet %s (%d %s samples)%n", png.toAbsolutePath(), picked.size(), split));
      }
    }
    return out.toString();
  }

  /**
   * A sheet inside the image folder the dataset was made from would be read as one more image (of a
   * class named after its folder, or a stray file at the top) by the next preprocess of it.
   */
  static void requireOutsideSource(Path png, Manifest m) {
    Manifest.Source source = m.source();
    if (source == null || source.path() == null) {
      return;
    }
    java.net.URI uri = new org.apache.hadoop.fs.Path(source.path()).toUri();
    if (uri.getScheme() != null && !uri.getScheme().equals("file")) {
      return;
    }
    Path images = Path.of(uri.getPath()).toAbsolutePath().normalize();
    if (Files.isDirectory(images) && png.toAbsolutePath().normalize().startsWith(images)) {
      throw new ConfigException(
          "inspect --sheet "
              + png
              + ": inside "
              + images
              + ", the images this dataset was preprocessed from; the next preprocess would read"
              + " the sheet as an image. Write it elsewhere");
    }
  }

  /**
   * Where the sheet goes unasked: beside a local dataset ({@code DATASET-samples.png}) when that
   * folder is writable and the name is free or a sheet of ramtrain's, else a temporary folder of
   * its own. Never the current directory, which may be someone's working tree.
   */
  static Path defaultSheet(String location) throws IOException {
    String name = Path.of(new org.apache.hadoop.fs.Path(location).getName()) + "-samples.png";
    java.net.URI uri = new org.apache.hadoop.fs.Path(location).toUri();
    if (uri.getScheme() == null || uri.getScheme().equals("file")) {
      Path dataset = Path.of(uri.getPath()).toAbsolutePath().normalize();
      Path parent = dataset.getParent();
      Path beside = parent == null ? null : parent.resolve(name);
      if (beside != null
          && Files.isWritable(parent)
          && (!Files.exists(beside) || AtomicFile.isRamtrainPng(beside))) {
        return beside;
      }
    }
    return Files.createTempDirectory("ramtrain-inspect-").resolve(name);
  }
}
