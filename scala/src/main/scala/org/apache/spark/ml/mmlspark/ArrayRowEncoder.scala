package org.apache.spark.ml.mmlspark

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.analysis.GetColumnByOrdinal
import org.apache.spark.sql.catalyst.encoders.{ExpressionEncoder, RowEncoder}
import org.apache.spark.sql.catalyst.expressions.{BoundReference, CreateNamedStruct, Literal}
import org.apache.spark.sql.catalyst.expressions.objects.{CreateExternalRow, Invoke}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{ArrayType, ObjectType, StructType}

/** Row encoders that hand chosen array columns to a `mapPartitions` function as Catalyst
  * `ArrayData` instead of Scala sequences.
  *
  * Spark's own Row encoder turns `array<float>` into a sequence of boxed `java.lang.Float`s, one
  * object per element; for tensors of 150 000 elements per row that boxing costs more than the
  * model. Here such a column arrives as a private copy of its `UnsafeArrayData` (one memcpy), which
  * a batch can be filled from with another memcpy, and leaves as that same `ArrayData`.
  */
object ArrayRowEncoder {

  /** Decodes `schema`, with the array columns at `ordinals` as `ArrayData` copies. */
  def decoder(schema: StructType, ordinals: Set[Int]): ExpressionEncoder[Row] = {
    val base = ExpressionEncoder(schema)
    var replaced = false
    val deserializer = base.objDeserializer.transformDown {
      case row: CreateExternalRow if !replaced && row.schema == schema =>
        replaced = true
        row.copy(children = row.children.zipWithIndex.map { case (standard, i) =>
          if (ordinals(i))
            Invoke(
              GetColumnByOrdinal(i, schema(i).dataType),
              "copy",
              ObjectType(classOf[ArrayData]),
              returnNullable = true
            )
          else standard
        })
    }
    if (!replaced)
      throw new IllegalStateException(s"unexpected Row deserializer ${base.objDeserializer}")
    ordinals.foreach(i => require(schema(i).dataType.isInstanceOf[ArrayType], schema(i)))
    SparkCompat.withSerde(base, base.objSerializer, deserializer)
  }

  /** Encodes rows of `schema` whose array columns at `ordinals` hold `ArrayData` (or null). */
  def encoder(schema: StructType, ordinals: Set[Int]): ExpressionEncoder[Row] = {
    val base = ExpressionEncoder(schema)
    val input = BoundReference(0, ObjectType(classOf[Row]), nullable = true)
    val fields = base.serializer.zipWithIndex.flatMap { case (standard, i) =>
      val value =
        if (ordinals(i))
          Invoke(input, "get", schema(i).dataType, Seq(Literal(i)), returnNullable = true)
        else standard.children.head // the Alias around each field's serializer
      Seq(Literal(schema(i).name), value)
    }
    SparkCompat.withSerde(base, CreateNamedStruct(fields), base.objDeserializer)
  }
}
