// Minimal JAX-RS RuntimeDelegate for the shaded javax.ws.rs API inside hadoop-client-runtime.
//
// PySpark ships Hadoop's shaded client jars, which contain the JAX-RS *API* that
// WebHdfsFileSystem.jsonParse() uses (MediaType.valueOf) but no JAX-RS implementation,
// so every webhdfs:// JSON response fails with "ClassNotFoundException:
// ...shaded.org.glassfish.jersey.internal.RuntimeDelegateImpl". A real Hadoop install has
// Jersey on the classpath. This class supplies only MediaType parsing; the WebHDFS client
// code itself is untouched. Compiled by tests/state_backends/test_webhdfs_spark.py.
package jstormpy.testsupport;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.shaded.javax.ws.rs.core.Application;
import org.apache.hadoop.shaded.javax.ws.rs.core.Link;
import org.apache.hadoop.shaded.javax.ws.rs.core.MediaType;
import org.apache.hadoop.shaded.javax.ws.rs.core.Response;
import org.apache.hadoop.shaded.javax.ws.rs.core.UriBuilder;
import org.apache.hadoop.shaded.javax.ws.rs.core.Variant;
import org.apache.hadoop.shaded.javax.ws.rs.ext.RuntimeDelegate;

public class ShadedJaxRsDelegate extends RuntimeDelegate {
  private static final HeaderDelegate<MediaType> MEDIA_TYPE = new HeaderDelegate<MediaType>() {
    @Override
    public MediaType fromString(String value) {
      String[] parts = value.split(";");
      String[] tv = parts[0].trim().split("/", 2);
      Map<String, String> params = new LinkedHashMap<>();
      for (int i = 1; i < parts.length; i++) {
        String[] kv = parts[i].trim().split("=", 2);
        if (kv.length == 2) {
          params.put(kv[0].trim(), kv[1].trim().replace("\"", ""));
        }
      }
      return new MediaType(tv[0], tv.length > 1 ? tv[1] : "*", params);
    }

    @Override
    public String toString(MediaType type) {
      StringBuilder sb = new StringBuilder(type.getType() + "/" + type.getSubtype());
      for (Map.Entry<String, String> e : type.getParameters().entrySet()) {
        sb.append(";").append(e.getKey()).append("=").append(e.getValue());
      }
      return sb.toString();
    }
  };

  @Override
  @SuppressWarnings("unchecked")
  public <T> HeaderDelegate<T> createHeaderDelegate(Class<T> type) {
    if (type == MediaType.class) {
      return (HeaderDelegate<T>) MEDIA_TYPE;
    }
    throw new IllegalArgumentException("unsupported header type " + type);
  }

  @Override
  public UriBuilder createUriBuilder() {
    throw new UnsupportedOperationException();
  }

  @Override
  public Response.ResponseBuilder createResponseBuilder() {
    throw new UnsupportedOperationException();
  }

  @Override
  public Variant.VariantListBuilder createVariantListBuilder() {
    throw new UnsupportedOperationException();
  }

  @Override
  public <T> T createEndpoint(Application application, Class<T> endpointType) {
    throw new UnsupportedOperationException();
  }

  @Override
  public Link.Builder createLinkBuilder() {
    throw new UnsupportedOperationException();
  }
}
