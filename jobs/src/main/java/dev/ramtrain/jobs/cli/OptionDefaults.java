package dev.ramtrain.jobs.cli;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigValue;
import dev.ramtrain.jobs.config.RamtrainConfig;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * Shows each flag's default in {@code --help}: a flag that sets a configuration key (its
 * description ends naming it, "(ramtrain.train.epochs)") gets that key's value in
 * conf/ramtrain-defaults.conf appended. The flag itself keeps no default (null: not given), so a
 * user's config file and --set still decide when the flag is left out.
 */
public final class OptionDefaults {
  private static final Pattern KEY = Pattern.compile("\\((ramtrain\\.[a-z0-9.-]+)\\)\\.?\\s*$");

  private OptionDefaults() {}

  /** Appends the defaults to the flags of {@code root}'s commands. */
  public static void show(CommandLine root) {
    Config defaults = RamtrainConfig.defaults();
    for (CommandLine command : root.getSubcommands().values()) {
      annotate(command.getCommandSpec(), defaults);
    }
  }

  private static void annotate(CommandSpec spec, Config defaults) {
    for (OptionSpec option : List.copyOf(spec.options())) {
      String[] description = option.description();
      if (description.length == 0) {
        continue;
      }
      Matcher key = KEY.matcher(description[description.length - 1]);
      if (!key.find() || !defaults.hasPath(key.group(1))) {
        continue;
      }
      ConfigValue value = defaults.getValue(key.group(1));
      String text = String.valueOf(value.unwrapped());
      String[] shown = description.clone();
      shown[shown.length - 1] += " Default: " + (text.isEmpty() ? "none" : text) + ".";
      spec.remove(option);
      spec.addOption(OptionSpec.builder(option).description(shown).build());
    }
  }
}
