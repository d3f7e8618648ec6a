package dev.ramtrain.jobs.cli;

import dev.ramtrain.jobs.config.RamtrainConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    description = {
      "The whole pipeline on a generated dataset with embedded Spark: generate shapes images,",
      "preprocess them into Arrow shards, and inspect the result (summary and contact sheet)."
    })
public final class DemoCommand implements Callable<Integer> {
  @Mixin CommonOptions common;

  @Option(
      names = "--workdir",
      paramLabel = "DIR",
      description = "Where everything goes (ramtrain.demo.workdir).")
  String workdir;

  @Option(
      names = "--images-per-class",
      description = "Generated images per class (ramtrain.generate.images-per-class).")
  Integer perClass;

  @Option(
      names = "--size",
      description = "Output images are SIZE x SIZE (ramtrain.etl.height/width).")
  Integer size;

  @Override
  public Integer call() throws Exception {
    RamtrainConfig base = common.load(flags(null));
    Path work = Path.of(base.string("ramtrain.demo.workdir")).toAbsolutePath();
    RamtrainConfig config = common.load(flags(work));
    Path images = work.resolve("images");
    Path dataset = work.resolve("dataset");

    System.out.println("[1/3] generate: shapes images under " + images);
    if (Files.isDirectory(images)) {
      System.out.println("      (already there; delete it to regenerate)");
    } else {
      GenerateCommand.run(config);
    }

    System.out.println("[2/3] preprocess: Spark decodes, resizes and shards into " + dataset);
    System.out.print(PreprocessCommand.run(config, common.master(), "ramtrain demo").indent(6));

    System.out.println("[3/3] inspect:");
    System.out.print(InspectCommand.run(config, dataset.toString(), "train").indent(6));
    return 0;
  }

  private Map<String, String> flags(Path work) {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.demo.workdir", workdir);
    f.put("ramtrain.generate.images-per-class", CommonOptions.text(perClass));
    f.put("ramtrain.etl.height", CommonOptions.text(size));
    f.put("ramtrain.etl.width", CommonOptions.text(size));
    if (work != null) {
      f.put("ramtrain.generate.output", work.resolve("images").toString());
      f.put("ramtrain.source.path", work.resolve("images").toString());
      f.put("ramtrain.source.type", "image-folder");
      f.put("ramtrain.etl.output", work.resolve("dataset").toString());
      f.put("ramtrain.etl.overwrite", "true");
      f.put("ramtrain.inspect.sheet", work.resolve("samples.png").toString());
    }
    return f;
  }
}
