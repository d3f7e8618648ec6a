package dev.ramtrain.etl.dataset;

import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;

/** Ships the driver's Hadoop configuration (credentials, filesystem settings) to executor tasks. */
public final class HadoopConf implements Serializable {
  private transient Configuration conf;

  public HadoopConf(Configuration conf) {
    this.conf = conf;
  }

  public Configuration get() {
    return conf;
  }

  private void writeObject(ObjectOutputStream out) throws IOException {
    conf.write(out);
  }

  private void readObject(ObjectInputStream in) throws IOException {
    conf = new Configuration(false);
    conf.readFields(in);
  }
}
