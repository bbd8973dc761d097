package mmlspark.contracts

import scala.reflect.runtime.universe.TypeTag
import scala.util.control.NonFatal

import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.expressions.UserDefinedFunction
import org.apache.spark.sql.functions.{col, udf}
import org.apache.spark.sql.types.Metadata

/** The result of one row: a value, or (value null) the reason there is none. */
final case class RowResult[T](value: T, error: String)

/** Per-row results that are a value or an error message, never a failed job (contract 3). */
object RowResults {

  /** The error message a failed row gets: the message of a rejected input (IllegalArgumentException
    * and its subclasses) as is, others with their exception class.
    */
  def describe(e: Throwable): String = e match {
    case rejected: IllegalArgumentException => rejected.getMessage
    case _: OutOfMemoryError =>
      s"out of memory on this executor (${e.getMessage}); the row was skipped and its memory " +
        "released. Lower the image or batch size, or give the executors more memory"
    case other => s"${other.getClass.getSimpleName}: ${other.getMessage}"
  }

  /** `f` run on one row: its value, or the row's error when it throws (running out of memory
    * included).
    */
  def attempt[T](f: => T): RowResult[T] =
    try RowResult(f, null)
    catch {
      case NonFatal(e) => RowResult(null.asInstanceOf[T], describe(e))
      case e: OutOfMemoryError => RowResult(null.asInstanceOf[T], describe(e))
    }

  /** A UDF giving a [[RowResult]] struct per row: `f`'s value, or its failure as the row's error.
    * Marked nondeterministic, so that Spark runs it once per row however many fields are read.
    */
  def udf1[A: TypeTag, T: TypeTag](f: A => T): UserDefinedFunction =
    udf((a: A) => attempt(f(a))).asNondeterministic()

  /** [[udf1]] for a function of two columns. */
  def udf2[A: TypeTag, B: TypeTag, T: TypeTag](f: (A, B) => T): UserDefinedFunction =
    udf((a: A, b: B) => attempt(f(a, b))).asNondeterministic()

  /** Adds `outputCol` and `errorCol` from `result`, a [[RowResult]] struct column made by [[udf1]]
    * or [[udf2]] (which Spark never runs twice for a row, however many fields are read).
    */
  def expand(
      dataset: Dataset[_],
      stage: Identifiable,
      result: Column,
      outputCol: String,
      errorCol: String,
      metadata: Metadata = Metadata.empty
  ): DataFrame = {
    val tmp = s"__result_${stage.uid}"
    dataset
      .withColumn(tmp, result)
      .withColumn(outputCol, col(s"$tmp.value").as(outputCol, metadata))
      .withColumn(errorCol, col(s"$tmp.error"))
      .drop(tmp)
  }
}
