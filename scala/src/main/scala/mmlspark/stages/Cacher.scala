package mmlspark.stages

import mmlspark.contracts.{StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Marks its input for caching (`Dataset.cache`), so later stages that read it more than once
  * compute it once. A stream cannot be cached and passes through unchanged, as does everything when
  * `disable` is true.
  */
final class Cacher(override val uid: String)
    extends Transformer
    with CacherDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("Cacher"))

  setDefault(disable -> false)

  override def transformSchema(schema: StructType): StructType = schema

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    if ($(disable) || dataset.isStreaming) dataset.toDF() else dataset.toDF().cache()
  }

  override def copy(extra: ParamMap): Cacher = defaultCopy(extra)
}

object Cacher extends StageReadable[Cacher]
