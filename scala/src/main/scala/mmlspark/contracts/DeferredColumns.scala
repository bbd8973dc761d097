package mmlspark.contracts

import java.util.{Collections, WeakHashMap}

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.col
import org.apache.spark.storage.StorageLevel

/** How a DataFrame made by a stage of this library was built, so that the next stage can work on
  * its `base` and leave the `deferred` columns to be computed after it, from the base's columns.
  *
  * A column such as `read_images`' `image` (a whole decoded photo) is costly to compute, and a
  * stage that runs its rows through `mapPartitions` (ONNXModel) makes Spark compute every input
  * column, read later or not. Computed after such a stage instead, it is an ordinary column
  * expression that Spark's optimizer drops when nothing reads it, and computes, with the same
  * values, when something does.
  *
  * @param base
  *   the columns computed so far (may hold hidden columns the deferred ones need)
  * @param deferred
  *   the names of the columns `restore` adds
  * @param restore
  *   adds the deferred columns to a DataFrame that has the base's columns
  * @param order
  *   the DataFrame's columns, in order
  * @param read
  *   what made the deferred columns, when a stage can compute them otherwise (`read_images`' own
  *   output: its `image` and `error` are the decode of the file at `path`, which an
  *   `ImageTransformer` on that image can do itself, at the size it needs)
  */
final case class Deferred(
    base: DataFrame,
    deferred: Set[String],
    restore: DataFrame => DataFrame,
    order: Seq[String],
    read: Option[Deferred.Source] = None
)

object Deferred {

  /** What made a DataFrame's deferred columns, for a stage that can compute them otherwise. */
  trait Source
}

/** The [[Deferred]] of the DataFrames this library's stages made, by identity: a stage consults it
  * only for the very DataFrame another stage returned (a DataFrame derived from it by the user is
  * not in it and is computed as it reads). Entries go with their DataFrames.
  */
object DeferredColumns {

  private val made = Collections.synchronizedMap(new WeakHashMap[Dataset[_], Deferred]())

  /** `df`, recorded as built by `deferred`. */
  def register(df: DataFrame, deferred: Deferred): DataFrame = {
    made.put(df, deferred)
    df
  }

  /** How `df` was built, when a stage of this library made it and it is not cached (a cached
    * DataFrame's columns are already computed).
    */
  def of(df: Dataset[_]): Option[Deferred] =
    Option(made.get(df)).filter(_ => df.storageLevel == StorageLevel.NONE)

  /** `df` with its columns in `order` (the same names, reordered), recorded as built as `df` was: a
    * stage that works on `df`'s base (an `ImageTransformer` reading `read_images`' files itself)
    * does so on it too. `spark.read.image()` puts `image` first this way.
    */
  def reordered(df: Dataset[_], order: java.util.List[String]): DataFrame = {
    val names = order.asScala.toSeq
    val out = df.toDF().select(names.map(c => col(SchemaUtils.quoted(c))): _*)
    of(df) match {
      case Some(d) if names.sorted == d.order.sorted => register(out, d.copy(order = names))
      case _ => out
    }
  }

  /** Builds the DataFrame of `deferred` from `base`: base's new columns after the recorded ones. */
  def assemble(deferred: Deferred, base: DataFrame): DataFrame = {
    val added =
      base.columns.filterNot(c => deferred.order.contains(c) || deferred.base.columns.contains(c))
    val order = deferred.order ++ added
    val out = deferred.restore(base).select(order.map(c => col(SchemaUtils.quoted(c))): _*)
    register(out, deferred.copy(base = base, order = order, read = None))
  }

  /** `stage(df)` for a stage that adds columns computed from `inputs`: run on `df`'s base when `df`
    * has deferred columns that `inputs` does not read, so they stay deferred; on `df` otherwise.
    */
  def around(df: Dataset[_], inputs: Seq[String])(stage: DataFrame => DataFrame): DataFrame =
    of(df) match {
      case Some(d) if inputs.forall(c => !d.deferred(c) && d.base.columns.contains(c)) =>
        assemble(d, stage(d.base))
      case _ => stage(df.toDF())
    }
}
