package dev.ramtrain.jobs.config;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigParseOptions;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueFactory;
import com.typesafe.config.ConfigValueType;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.settings.Spelling;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Supplier;

/**
 * The merged configuration: the documented defaults (conf/ramtrain-defaults.conf, also inside the
 * jar), then a user file, then {@code spark.ramtrain.*} Spark conf keys, then command-line flags.
 * Every key must exist in the defaults and every value must have the default's type; typed getters
 * fail naming the key, the allowed values and where the bad value came from.
 */
public final class RamtrainConfig {
  public static final String DEFAULTS_RESOURCE = "ramtrain-defaults.conf";
  public static final String ROOT = "ramtrain";
  public static final String SPARK_PREFIX = "spark.";

  private final Config defaults;
  private final Config config;

  private RamtrainConfig(Config defaults, Config config) {
    this.defaults = defaults;
    this.config = config;
  }

  public static Config defaults() {
    return ConfigFactory.parseResources(
        RamtrainConfig.class.getClassLoader(),
        DEFAULTS_RESOURCE,
        ConfigParseOptions.defaults().setAllowMissing(false));
  }

  /**
   * Merges the layers. {@code sparkConf} holds Spark conf entries (only {@code spark.ramtrain.*}
   * are used); {@code flags} maps full keys ({@code ramtrain.etl.height}) to the flag's text.
   */
  public static RamtrainConfig load(
      Path userFile, Map<String, String> sparkConf, Map<String, String> flags) {
    Config defaults = defaults();
    Config merged = defaults;
    if (userFile != null) {
      if (!Files.isReadable(userFile)) {
        throw new ConfigException("config file " + userFile + " does not exist or cannot be read");
      }
      if (!Files.isRegularFile(userFile)) {
        throw new ConfigException("config file " + userFile + " is not a file (a directory?)");
      }
      Config user;
      try {
        user = ConfigFactory.parseFile(userFile.toFile());
      } catch (com.typesafe.config.ConfigException e) {
        throw new ConfigException("config file " + userFile + ": " + e.getMessage());
      }
      requireRamtrainRoot(userFile, user);
      merged = user.withFallback(merged);
    }
    Config spark = ConfigFactory.empty("Spark conf");
    for (var e : sparkConf.entrySet()) {
      if (e.getKey().startsWith(SPARK_PREFIX + ROOT + ".")) {
        String key = e.getKey().substring(SPARK_PREFIX.length());
        spark =
            spark.withValue(
                key, textValue(defaults, key, e.getValue(), "Spark conf " + e.getKey()));
      }
    }
    Config cli = ConfigFactory.empty("command line");
    for (var e : flags.entrySet()) {
      cli =
          cli.withValue(e.getKey(), textValue(defaults, e.getKey(), e.getValue(), "command line"));
    }
    Config resolved;
    try {
      resolved = cli.withFallback(spark).withFallback(merged).resolve();
    } catch (com.typesafe.config.ConfigException e) { // ${UNSET}, a cycle: a usage error
      throw new ConfigException(
          (userFile != null ? "config file " + userFile + ": " : "") + e.getMessage());
    }
    RamtrainConfig result = new RamtrainConfig(defaults, resolved);
    result.rejectUnknownKeys();
    return result;
  }

  /**
   * A user file sets {@code ramtrain.*} keys; other libraries' top-level keys may share it, but one
   * that is a near miss of {@value #ROOT} ({@code ramtran}, {@code Ramtrain}) would be ignored
   * whole, silently: refused, as is a file that sets no ramtrain key at all.
   */
  private static void requireRamtrainRoot(Path file, Config user) {
    Set<String> roots = user.root().keySet();
    for (String root : roots) {
      if (!root.equals(ROOT) && distance(root.toLowerCase(Locale.ROOT), ROOT) <= 3) {
        throw new ConfigException(
            "config file "
                + file
                + ": unknown top-level key '"
                + root
                + "'; did you mean "
                + ROOT
                + "? Keys are listed in conf/ramtrain-defaults.conf");
      }
    }
    if (!roots.contains(ROOT)) {
      throw new ConfigException(
          "config file "
              + file
              + " sets no "
              + ROOT
              + ".* key (its top-level keys: "
              + new TreeSet<>(roots)
              + ")");
    }
  }

  public Config raw() {
    return config;
  }

  /**
   * Every {@code ramtrain.*} setting as resolved, key to value text, sorted (for a run's record).
   */
  public SortedMap<String, String> resolved() {
    return flat(config);
  }

  /** Every {@code ramtrain.*} key of {@code c}, to its value as text. */
  public static SortedMap<String, String> flat(Config c) {
    SortedMap<String, String> flat = new TreeMap<>();
    if (c.hasPath("ramtrain")) {
      for (var e : c.getConfig("ramtrain").entrySet()) {
        flat.put("ramtrain." + e.getKey(), String.valueOf(e.getValue().unwrapped()));
      }
    }
    return flat;
  }

  /**
   * A value as {@link #flat} wrote it, as a flag gives it: a list ({@code [0.08, 1]}, Java's
   * rendering) as its comma-separated items.
   */
  public static String flagText(String key, String flat) {
    Config defaults = defaults();
    boolean list =
        defaults.hasPathOrNull(key) && defaults.getValue(key).valueType() == ConfigValueType.LIST;
    return list && flat.startsWith("[") && flat.endsWith("]")
        ? flat.substring(1, flat.length() - 1)
        : flat;
  }

  /** The merged settings as HOCON text: how they travel to a Spark task. */
  public String render() {
    return config.root().render(com.typesafe.config.ConfigRenderOptions.concise());
  }

  /**
   * Fails naming {@code key} when its value is not of its default's kind (a number, a boolean, a
   * list): what the commands find when they read a setting, found where a program sets it.
   */
  public void requireKindOfDefault(String key) {
    if (!defaults.hasPath(key)) {
      return; // an unknown key was refused when loading
    }
    ConfigValue d = defaults.getValue(key);
    switch (d.valueType()) {
      case NUMBER -> {
        if (d.unwrapped() instanceof Integer || d.unwrapped() instanceof Long) {
          longValue(key);
        } else {
          number(key);
        }
      }
      case BOOLEAN -> bool(key);
      case LIST -> strings(key);
      default -> string(key);
    }
  }

  /** Settings {@link #render rendered} on the driver, read back in a task. */
  public static RamtrainConfig fromRendered(String text) {
    return new RamtrainConfig(defaults(), ConfigFactory.parseString(text).resolve());
  }

  public String string(String key) {
    return get(key, ConfigValueType.STRING, () -> config.getString(key));
  }

  public int integer(String key) {
    return get(key, ConfigValueType.NUMBER, () -> Math.toIntExact(whole(key)));
  }

  public long longValue(String key) {
    return get(key, ConfigValueType.NUMBER, () -> whole(key));
  }

  public double number(String key) {
    return get(
        key,
        ConfigValueType.NUMBER,
        () -> {
          double v = config.getDouble(key);
          if (!Double.isFinite(v)) { // "Infinity" and "NaN" parse as numbers
            throw new com.typesafe.config.ConfigException.BadValue(key, "not finite");
          }
          return v;
        });
  }

  /** A whole number: HOCON would turn 1.5 into 1 without a word. */
  private long whole(String key) {
    Number n = config.getNumber(key);
    double d = n.doubleValue();
    if (!(n instanceof Integer || n instanceof Long)
        && (d != Math.rint(d) || Double.isInfinite(d))) {
      throw new com.typesafe.config.ConfigException.BadValue(key, "not a whole number");
    }
    return config.getLong(key);
  }

  public boolean bool(String key) {
    return get(key, ConfigValueType.BOOLEAN, () -> config.getBoolean(key));
  }

  /** A size in bytes; HOCON units such as 64MiB are accepted. */
  public long bytes(String key) {
    return get(key, ConfigValueType.NUMBER, () -> config.getBytes(key));
  }

  /** A duration; HOCON units such as 30s or 5m are accepted. */
  public java.time.Duration duration(String key) {
    try {
      return get(key, ConfigValueType.STRING, () -> config.getDuration(key));
    } catch (ConfigException e) {
      throw new ConfigException(
          e.getMessage().replace("is not a string", "is not a duration such as 30s or 5m"));
    }
  }

  public List<String> strings(String key) {
    return get(key, ConfigValueType.LIST, () -> config.getStringList(key));
  }

  /** An enum written in lower case with hyphens ({@code shorter-side-crop}). */
  public <E extends Enum<E>> E choice(String key, Class<E> type) {
    String value = string(key);
    for (E constant : type.getEnumConstants()) {
      if (Spelling.of(constant).equals(value.toLowerCase(Locale.ROOT))) {
        return constant;
      }
    }
    throw new ConfigException(
        key
            + " = '"
            + value
            + "' is not allowed ("
            + origin(key)
            + "); allowed values: "
            + String.join(", ", Arrays.stream(type.getEnumConstants()).map(Spelling::of).toList()));
  }

  /** Fails when a value is outside a range, naming the key. */
  public static void require(boolean ok, String key, String rule) {
    if (!ok) {
      throw new ConfigException(key + ": " + rule);
    }
  }

  /**
   * Builds a value whose own checks throw IllegalArgumentException (a trainer or ETL record); such
   * a failure is a usage error naming {@code key}.
   */
  public static <T> T checked(String key, Supplier<T> build) {
    try {
      return build.get();
    } catch (IllegalArgumentException e) {
      throw new ConfigException(key + ": " + e.getMessage());
    }
  }

  private interface Getter<T> {
    T get();
  }

  private <T> T get(String key, ConfigValueType expected, Getter<T> getter) {
    if (!defaults.hasPathOrNull(key)) {
      throw new IllegalArgumentException("no configuration key " + key + " in the defaults");
    }
    try {
      return getter.get();
    } catch (com.typesafe.config.ConfigException.WrongType
        | com.typesafe.config.ConfigException.BadValue
        | ArithmeticException e) {
      String shown = config.hasPath(key) ? config.getValue(key).render() : "null";
      throw new ConfigException(
          key
              + " = "
              + shown
              + " is not "
              + describe(expected, key)
              + " ("
              + origin(key)
              + "); default: "
              + defaults.getValue(key).render());
    }
  }

  private String describe(ConfigValueType type, String key) {
    return switch (type) {
      case NUMBER ->
          defaults.getValue(key).unwrapped() instanceof Integer ? "a number (integer)" : "a number";
      case BOOLEAN -> "a boolean (true or false)";
      case LIST -> "a list";
      default -> "a " + type.name().toLowerCase(Locale.ROOT);
    };
  }

  private String origin(String key) {
    ConfigValue value = config.hasPathOrNull(key) ? config.getValue(key) : null;
    return value == null ? "unset" : "from " + value.origin().description();
  }

  private void rejectUnknownKeys() {
    Set<String> known = new TreeSet<>();
    defaults.entrySet().forEach(e -> known.add(e.getKey()));
    for (var entry : config.entrySet()) {
      String key = entry.getKey();
      if (!key.startsWith(ROOT + ".")) {
        continue; // other libraries' keys in a shared file are not ours to judge
      }
      if (key.startsWith(ROOT + ".devices.")) {
        continue; // users add device profiles; DeviceProfiles checks each one it reads
      }
      if (!known.contains(key)) {
        String nearest =
            known.stream().min(Comparator.comparingInt(k -> distance(k, key))).orElse("");
        throw new ConfigException(
            "unknown configuration key "
                + key
                + " ("
                + entry.getValue().origin().description()
                + "); did you mean "
                + nearest
                + "? Keys are listed in conf/ramtrain-defaults.conf");
      }
    }
  }

  /** Text from a flag or Spark conf, typed like the default so lists can be given as a,b,c. */
  private static ConfigValue textValue(Config defaults, String key, String text, String origin) {
    Object value = text;
    if (defaults.hasPathOrNull(key) && defaults.getValue(key).valueType() == ConfigValueType.LIST) {
      value =
          text.isBlank() ? List.of() : Arrays.stream(text.split(",")).map(String::strip).toList();
    }
    return ConfigValueFactory.fromAnyRef(value, origin);
  }

  private static int distance(String a, String b) {
    int[] prev = new int[b.length() + 1];
    int[] cur = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      prev[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      cur[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + cost);
      }
      int[] t = prev;
      prev = cur;
      cur = t;
    }
    return prev[b.length()];
  }
}
